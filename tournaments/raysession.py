"""Starting or joining Ray for one run, so that a failure is one line and nothing outlives
the driver.

- Without an address (no ``--address``, no RAY_ADDRESS) a run starts a private local
  instance, always: Ray's own default would join a cluster that ``ray start`` left on
  this machine (or one that is gone, through its leftover ``ray_current_cluster`` file).
- With an address, the cluster is probed first, in a child process that is given up on
  after ``timeout`` seconds (Ray itself retries for good against an address where nothing
  listens). Clusters started with ``ray start`` (Ray 2.60) ask for a token: the token
  configured here (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or Ray's default file
  ``~/.ray/auth_token``) is used, and a refused token is one line saying what to set.
- A local instance is watched by a small guard process in its own session: when the
  driver ends, however it ends (SIGKILL included), the guard kills every Ray process the
  driver started that is still alive. Ray ends its GCS and raylet with the driver, but
  not the raylet's agents (``DashboardAgent``, ``RuntimeEnvAgent``), which ignore SIGTERM.
- While Ray runs, this process's stdout and stderr (file descriptors 1 and 2, where Ray's
  C++ core and its Python loggers write) go to a log file in the run folder; the
  progress bar writes to the terminal through a copy of the original stderr.
- Code of one's own (``arena tournament --agents FILE.py``): inside ``worker_setup``,
  every actor a run starts through ``actor_class`` runs a setup function in its process
  before it is built (it registers the entries there), and a cluster joined by
  ``connect`` gets the module files in its runtime environment (``py_modules``), so
  that a node without them can import them. The setup runs per actor rather than as
  Ray's ``worker_process_setup_hook``, which only ``ray.init`` takes: a Ray already
  running in this process has its runtime environment fixed. Such a Ray gets no
  ``py_modules`` either: its workers load the files from their paths on this machine,
  or from what its own runtime environment ships.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

CONNECT_TIMEOUT_S = 30.0
"""How long joining a cluster may take before the run stops with one error line."""
LOG_NAME = "ray.log"
"""Ray's output during a run, in the run folder."""

_PROBE = """
import sys
from ray._raylet import GcsClient
client = GcsClient(address=sys.argv[1])
client.check_alive([], timeout=5)
print("ok", flush=True)
"""

# Waits for the driver to close its pipe (it exits or dies), then kills the processes the
# driver listed that are still the same processes (pid and start time).
_GUARD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)

def started(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None

watched = {}
for line in sys.stdin:
    pid, start = line.split()
    watched[int(pid)] = start
for pid, start in watched.items():
    if started(pid) == start:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


class RayConnectError(RuntimeError):
    """Ray could not be started or joined; the message is one line saying why."""


class TokenAsked(RayConnectError):
    """The cluster asks for a token this process did not send, or refused the one sent."""


# ---------------------------------------------------------------------- output
@contextlib.contextmanager
def output_to(path: str | Path) -> Iterator[TextIO]:
    """Send this process's fds 1 and 2 to ``path`` (appending) for the duration; yield a
    text stream on the original stderr, for what must still reach the terminal."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = (os.dup(1), os.dup(2))
    except OSError:  # no fds 1 and 2 to redirect (a daemon): nothing to keep apart
        yield sys.stderr
        return
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    terminal = os.fdopen(os.dup(saved[1]), "w", buffering=1)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield terminal
    finally:
        for stream in (sys.stdout, sys.stderr, terminal):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)
        terminal.close()


# ---------------------------------------------------------------------- processes
def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def descendants(root: int | None = None) -> dict[int, str]:
    """pid -> start time of every live descendant of ``root`` (this process), from /proc
    (empty where there is none)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    out: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _start_time(pid)
        if start is not None and pid not in out:
            out[pid] = start
            todo.extend(children.get(pid, []))
    return out


class _Guard:
    """The process that kills what the driver started once the driver is gone."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        if not os.path.isdir("/proc"):  # process ids are read from /proc (Linux)
            return
        with contextlib.suppress(OSError):
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _GUARD],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C or a kill of the driver's group spares it
                text=True,
            )

    def watch(self) -> None:
        """Add every live descendant of this process (but the guard) to the list."""
        if self.proc is None or self.proc.stdin is None:
            return
        pids = {p: s for p, s in descendants().items() if p != self.proc.pid}
        with contextlib.suppress(OSError):
            self.proc.stdin.write("".join(f"{p} {s}\n" for p, s in pids.items()))
            self.proc.stdin.flush()

    def close(self) -> None:
        """Let the guard kill what is left of the listed processes, and wait for it."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


# ---------------------------------------------------------------------- joining
DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")


def token_source() -> str | None:
    """Where a token for a cluster comes from here, in Ray's order; None if nowhere."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return f"RAY_AUTH_TOKEN_PATH ({path})"
    if DEFAULT_TOKEN_FILE.expanduser().is_file():
        return str(DEFAULT_TOKEN_FILE.expanduser())
    return None


def _join_probe(address: str, timeout: float) -> None:
    """``probe`` the cluster at ``address``, sending the configured token only to a cluster
    that asks for one: Ray turns token mode on by itself only for clusters it finds on its
    own, not for an address it is given, and a token sent to a cluster without tokens makes
    it refuse this process's calls once the run has started. A mode set explicitly
    (RAY_AUTH_MODE) is kept as it is."""
    if os.environ.get("RAY_AUTH_MODE") is not None or token_source() is None:
        probe(address, timeout)
        return
    try:
        probe(address, timeout)
    except TokenAsked:
        _use_token()
        probe(address, timeout)


def _use_token() -> None:
    """Send the configured token from now on (RAY_AUTH_MODE=token in this process)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    with contextlib.suppress(ImportError, AttributeError):
        # Ray reads its mode once per process; this is how Ray itself refreshes it.
        from ray._raylet import Config

        Config.initialize("")


def _host_port(address: str) -> tuple[str, int] | None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or "://" in address or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def probe(address: str, timeout: float) -> None:
    """Check that a Ray cluster answers at ``address`` (HOST:PORT) within ``timeout``
    seconds and accepts this process; RayConnectError says what is wrong otherwise."""
    hp = _host_port(address)
    if hp is None:  # ray://, auto and the like: Ray's own resolution and errors
        return
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE, address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        if not _listening(*hp):
            raise RayConnectError(
                f"cannot join the Ray cluster at {address}: nothing is listening there "
                f"(waited {timeout:g} s; start its head with `ray start --head`, or set "
                "--connect-timeout)"
            ) from None
        raise RayConnectError(
            f"cannot join the Ray cluster at {address}: no answer from its GCS within "
            f"{timeout:g} s (--connect-timeout sets the wait)"
        ) from None
    if proc.returncode == 0 and "ok" in out.split():
        return
    if any(word in out for word in ("InvalidAuthToken", "AuthenticationError", "Unauthent")):
        source, mode = token_source(), os.environ.get("RAY_AUTH_MODE")
        if source is not None and mode != "token":
            raise TokenAsked(
                f"the Ray cluster at {address} asks for a token and RAY_AUTH_MODE="
                f"{mode or '(unset)'} sends none: unset RAY_AUTH_MODE or set it to token"
            )
        if source is None:
            raise TokenAsked(
                f"the Ray cluster at {address} asks for a token and none is set here: set "
                "RAY_AUTH_TOKEN to its token (`ray get-auth-token` on the head prints it), "
                "or RAY_AUTH_TOKEN_PATH to a file holding it"
            )
        raise TokenAsked(
            f"the Ray cluster at {address} refused the token from {source}: set "
            "RAY_AUTH_TOKEN to its token (`ray get-auth-token` on the head prints it)"
        )
    last = [line for line in out.splitlines() if line.strip()]
    why = last[-1][:300] if last else f"exit code {proc.returncode}"
    waited = time.monotonic() - t0
    raise RayConnectError(f"cannot join the Ray cluster at {address} ({waited:.0f} s): {why}")


# ---------------------------------------------------------------------- worker setup
_SETUP: list[tuple[Callable[[], None], tuple[str, ...]]] = []
"""The open ``worker_setup`` contexts, innermost last: (setup, py_modules)."""


@contextlib.contextmanager
def worker_setup(setup: Callable[[], None], py_modules: Sequence[str] = ()) -> Iterator[None]:
    """For the duration, each actor built from ``actor_class(cls)`` calls ``setup()`` in
    its process before ``cls.__init__`` (each task of ``task_function(fn)``, before
    ``fn``), and a cluster that ``connect`` joins gets ``py_modules`` (local files or
    package folders) in its runtime environment. ``setup``
    travels to the workers pickled: a module-level function, or a ``functools.partial``
    of one."""
    _SETUP.append((setup, tuple(py_modules)))
    try:
        yield
    finally:
        _SETUP.pop()


def actor_class(cls: type) -> type:
    """The class to make a run's Ray actor from: ``cls`` itself, or inside ``worker_setup``
    a subclass whose ``__init__`` runs the setup first (in the actor's process)."""
    if not _SETUP:
        return cls
    setup = _SETUP[-1][0]

    class WithSetup(cls):  # pickled by value, with ``setup``, to the worker
        def __init__(self, *args, **kwargs) -> None:
            setup()
            super().__init__(*args, **kwargs)

    WithSetup.__name__ = cls.__name__  # what Ray's logs and errors call the actor
    WithSetup.__doc__ = cls.__doc__
    return WithSetup


def task_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function to make a run's Ray task from: ``fn`` itself, or inside
    ``worker_setup`` a function that runs the setup first (in the worker's process)."""
    if not _SETUP:
        return fn
    setup = _SETUP[-1][0]

    def with_setup(*args, **kwargs):  # pickled by value, with ``setup``, to the worker
        setup()
        return fn(*args, **kwargs)

    with_setup.__name__ = fn.__name__  # what Ray's logs and errors call the task
    with_setup.__doc__ = fn.__doc__
    return with_setup


def _runtime_env() -> dict | None:
    """The runtime environment for a cluster joined inside ``worker_setup``."""
    modules = [m for _, mods in _SETUP for m in mods]
    return {"py_modules": list(dict.fromkeys(modules))} if modules else None


# ---------------------------------------------------------------------- sessions
class RaySession:
    """Ray for one run: joined, started here, or already running in this process."""

    def __init__(self, owned: bool, guard: _Guard | None = None) -> None:
        self.owned = owned
        self.guard = guard

    def watch(self) -> None:
        """List the processes Ray has started so far with the guard (a local instance)."""
        if self.guard is not None:
            self.guard.watch()

    def close(self) -> None:
        """Shut down what this session started; Ray that was running before stays."""
        try:
            if self.owned:
                import ray

                ray.shutdown()
        finally:
            if self.guard is not None:
                self.guard.close()


def connect(address: str | None, workers: int, timeout: float = CONNECT_TIMEOUT_S) -> RaySession:
    """Join ``address`` (else RAY_ADDRESS), or start a private local instance with
    ``workers`` CPUs; a Ray already initialised in this process is used as it is. A
    cluster joined inside ``worker_setup`` gets its ``py_modules``."""
    import ray

    if ray.is_initialized():
        return RaySession(owned=False)
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address == "local":  # Ray's word for a new local instance
        address = None
    if address:
        _join_probe(address, timeout)
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env=_runtime_env(),
            )
        except Exception as err:  # noqa: BLE001 - Ray raises many kinds; one line for all
            raise RayConnectError(
                f"cannot join the Ray cluster at {address}: {_one_line(err)}"
            ) from None
        return RaySession(owned=True)
    guard = _Guard()
    try:
        ray.init(
            address="local",  # never a cluster found on this machine
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=200 * 1024 * 1024,
            # A unit's result (about 150 KB) then comes back inline with the reply instead of
            # through the shared-memory store, which costs the driver a fetch per unit.
            _system_config={"max_direct_call_object_size": 1 << 20},
        )
    except BaseException as err:
        guard.watch()
        guard.close()
        if isinstance(err, Exception):
            raise RayConnectError(f"cannot start a local Ray: {_one_line(err)}") from None
        raise
    session = RaySession(owned=True, guard=guard)
    session.watch()
    return session


def _one_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[0] if lines else type(err).__name__)[:300]


__all__ = [
    "CONNECT_TIMEOUT_S",
    "LOG_NAME",
    "RayConnectError",
    "RaySession",
    "actor_class",
    "connect",
    "descendants",
    "output_to",
    "probe",
    "token_source",
    "worker_setup",
]
