"""Ray as a user meets it, with a real head node: ``ray start --head`` on loopback (token
authentication on, as Ray 2.60 starts clusters), joined with ``--address``; an embedded run
beside that head; a driver killed mid-run; an address where nothing listens; a cluster file
left behind by a head that is gone.

One head for the module, started once and stopped by its own process ids (never ``ray
stop``, which would stop every Ray on the machine). Each child runs under its own timeout
and the module under an alarm. Every Ray process here gets a private RAY_TMPDIR and HOME,
so nothing leaks into (or out of) other Ray users of the machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tournaments.raysession import descendants

pytest.importorskip("ray")
RAY = shutil.which("ray")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(RAY is None or not os.path.isdir("/proc"), reason="needs ray and /proc"),
]

ROOT = Path(__file__).resolve().parents[1]
MODULE_TIMEOUT_S = 480

SHORT = """
[tournament]
name = "short"
seed = 2
markets = 200
sellers = ["greedy_matcher"]
buyers = ["haggler"]
disclosure = ["hidden", "mandatory"]
transcripts = 1
[configs.a]
buyers = 6
agent_share = 0.5
"""

LONG = """
[tournament]
name = "long"
markets = 40000
sellers = ["greedy_matcher"]
buyers = ["haggler"]
disclosure = ["hidden", "mandatory"]
transcripts = 0
[configs.a]
buyers = 8
[configs.b]
buyers = 6
"""

RAY_CHATTER = ("Started a local Ray", "Token authentication", "Connecting to", "raylet", "\x1b[")


@pytest.fixture(scope="module", autouse=True)
def module_alarm():
    def expired(signum, frame):
        raise TimeoutError(f"test_ray_head took over {MODULE_TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(MODULE_TIMEOUT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_env(home: Path, tmpdir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    return {**env, "PYTHONPATH": str(ROOT), "HOME": str(home), "RAY_TMPDIR": str(tmpdir), **extra}


def arena(args: list, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tournaments.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def alive(pid: int, start: str | None = None) -> bool:
    """A live (not zombie) process of that id (and start time, if given)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and (start is None or fields[19] == start)


def with_env(value: str) -> list[int]:
    """Live processes whose environment holds ``value`` (every process a driver started
    inherits its RAY_TMPDIR)."""
    out = []
    needle = value.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in Path(f"/proc/{entry}/environ").read_bytes() and alive(int(entry)):
                    out.append(int(entry))
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process, every descendant and every member of its process group."""
    pids = set(descendants(pid)) | {pid}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pid:
                    pids.add(int(entry))
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def wait_until(check, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


class Head:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "home"
        self.tmpdir = base / "t"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None


@pytest.fixture(scope="module")
def head():
    # Short paths: Ray's socket paths (under RAY_TMPDIR) have a length limit.
    h = Head(Path(tempfile.mkdtemp(prefix="rh", dir="/tmp")))
    (h.home / ".ray").mkdir(parents=True)
    (h.home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    env = client_env(h.home, h.tmpdir)
    log = open(h.base / "head.log", "w")  # noqa: SIM115 - closed at teardown
    h.proc = subprocess.Popen(
        [RAY, "start", "--head", f"--port={h.port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", "--block"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    probe = [sys.executable, "-c", "from tournaments.raysession import probe; import sys; "
             "probe(sys.argv[1], 5)", h.address]  # fmt: skip

    def up() -> bool:
        if h.proc.poll() is not None:
            raise RuntimeError((h.base / "head.log").read_text()[-2000:])
        env_token = {**env, "RAY_AUTH_MODE": "token"}
        return subprocess.run(probe, env=env_token, capture_output=True, timeout=30).returncode == 0

    try:
        assert wait_until(up, 120, step=1.0), (h.base / "head.log").read_text()[-2000:]
        yield h
    finally:
        kill_tree(h.proc.pid)
        h.proc.wait(timeout=30)
        log.close()
        assert wait_until(lambda: not with_env(str(h.tmpdir)), 20), "head processes left"
        shutil.rmtree(h.base, ignore_errors=True)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The SHORT spec played without Ray: rows every Ray run must equal."""
    base = tmp_path_factory.mktemp("baseline")
    spec = base / "short.toml"
    spec.write_text(SHORT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = arena(["tournament", spec, "--out", base / "run", "--no-ray", "--quiet"], env)
    assert out.returncode == 0, out.stderr
    out = arena(["export", base / "run", "--to", base / "rows.csv"], env)
    assert out.returncode == 0, out.stderr
    return spec, (base / "rows.csv").read_text()


def rows(folder: Path, env: dict) -> str:
    out = arena(["export", folder, "--to", folder.parent / f"{folder.name}.csv"], env)
    assert out.returncode == 0, out.stderr
    return (folder.parent / f"{folder.name}.csv").read_text()


def assert_quiet_terminal(out: subprocess.CompletedProcess) -> None:
    for text in (out.stdout, out.stderr):
        for chatter in RAY_CHATTER:
            assert chatter not in text, (chatter, text[-1500:])


# ---------------------------------------------------------------------- joining
def test_joining_a_head_with_token_auth_uses_rays_token_file(head, baseline, tmp_path):
    spec, expected = baseline
    env = client_env(head.home, head.tmpdir)  # the token in ~/.ray/auth_token, nothing set
    out = arena(["tournament", spec, "--address", head.address, "--out", tmp_path / "run",
                 "--workers", "1"], env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert_quiet_terminal(out)
    assert "played 2 of 2 units (400 markets)" in out.stdout
    assert rows(tmp_path / "run", env) == expected


def test_a_wrong_or_missing_token_is_one_line_saying_what_to_set(head, tmp_path):
    spec = tmp_path / "short.toml"
    spec.write_text(SHORT)
    nohome = tmp_path / "home"
    nohome.mkdir()
    cases = [
        ({"RAY_AUTH_TOKEN": "0" * 64}, "refused the token from RAY_AUTH_TOKEN: set RAY_AUTH_TOKEN"),
        ({}, "asks for a token and none is set here: set RAY_AUTH_TOKEN"),
    ]
    for extra, needle in cases:
        env = client_env(nohome, head.tmpdir, **extra)
        t0 = time.monotonic()
        out = arena(["tournament", spec, "--address", head.address, "--out", tmp_path / "run",
                     "--quiet"], env, timeout=120)  # fmt: skip
        assert out.returncode == 2, out.stderr[-2000:]
        assert out.stderr.startswith("arena: error: the Ray cluster at 127.0.0.1:")
        assert needle in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert out.stdout == "" and time.monotonic() - t0 < 45
        assert not (tmp_path / "run").exists()


def test_an_address_where_nothing_listens_is_one_line_within_the_timeout(tmp_path):
    spec = tmp_path / "short.toml"
    spec.write_text(SHORT)
    env = client_env(tmp_path, tmp_path / "t")
    t0 = time.monotonic()
    out = arena(["tournament", spec, "--address", f"127.0.0.1:{free_port()}", "--out",
                 tmp_path / "runs" / "x", "--connect-timeout", "3"], env, timeout=60)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "nothing is listening there" in out.stderr
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------- embedded runs
def test_an_embedded_run_beside_a_head_is_private_and_dies_with_its_driver(head, tmp_path):
    spec = tmp_path / "long.toml"
    spec.write_text(LONG)
    # Ray's own default would join the head through its ray_current_cluster file here.
    env = client_env(head.home, head.tmpdir)
    assert list(head.tmpdir.glob("*/ray_current_cluster"))
    out_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "tournaments.cli", "tournament", str(spec), "--out",
           str(out_dir), "--workers", "1", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:

        def stored() -> bool:
            if proc.poll() is not None:
                return True
            if not (out_dir / "results.sqlite").exists():
                return False
            with contextlib.suppress(sqlite3.Error):
                conn = sqlite3.connect(out_dir / "results.sqlite", timeout=5)
                try:
                    return conn.execute("SELECT count(*) FROM units").fetchone()[0] >= 1
                finally:
                    conn.close()
            return False

        assert wait_until(stored, 180, step=0.05)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        started = descendants(proc.pid)
        assert len(started) >= 4, started  # GCS, raylet, its agents, the worker, the guard
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)

        def gone() -> bool:
            return not any(alive(p, s) for p, s in started.items())

        assert wait_until(gone, 30), {p for p, s in started.items() if alive(p, s)}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_embedded_run_ignores_a_cluster_file_left_behind(baseline, tmp_path):
    spec, expected = baseline
    # A head that is gone (killed, crashed, rebooted) leaves its address in this file.
    tmpdir = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))
    try:
        (tmpdir / "ray").mkdir()
        (tmpdir / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
        env = client_env(tmp_path, tmpdir)
        out_dir = tmp_path / "run"
        out = arena(["tournament", spec, "--out", out_dir, "--workers", "1"], env)
        assert out.returncode == 0, out.stderr[-2000:]
        # Ray's own lines went to the run's log, none to the terminal.
        assert_quiet_terminal(out)
        assert "Started a local Ray instance" in (out_dir / "ray.log").read_text()
        assert {p.name for p in out_dir.iterdir()} >= {"results.sqlite", "report.md", "ray.log"}
        assert not [p for p in out_dir.iterdir() if p.name.endswith(("-wal", "-shm"))]
        assert rows(out_dir, env) == expected
        # Nothing of that Ray outlives the run.
        assert wait_until(lambda: not with_env(str(tmpdir)), 20), with_env(str(tmpdir))
        again = arena(["tournament", spec, "--out", out_dir, "--workers", "1"], env)
        assert again.returncode == 0 and f"{out_dir} is complete" in again.stdout
        assert "Ray" not in again.stdout.split("Ratings")[0]
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
