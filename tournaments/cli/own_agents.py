"""Code of one's own: ``arena check FILE.py:CLASS`` and ``--agents FILE.py`` (``play``,
``eval``, ``agents``, ``tournament``).

``load_module`` imports a file as ``python FILE.py`` sees it: with the file's folder on
``sys.path`` while it imports, so that a module beside it imports too. A file is refused
when its module name is the name of another module here (``arena.py``, ``agents.py``,
``numpy.py``): loaded under that name it would replace that module for the rest of the
run. A dotted module name (``my_lab.agents``) is imported from ``sys.path`` and the
current folder, as ``python -m`` would.

``load_agents`` imports a module and registers its entries: its top-level
``agents.registry.register(...)`` calls, and its ``register_entries()`` when it has one
(the documented pattern: a function that registers each entry once, however often it
is called; ``examples/my_agents.py``). A module that registers nothing is an error.

On Ray, ``ship`` has every actor of a run (match workers, policy hosts) load the same
modules and register the same entries before it is built (``register_in_worker``): from
the same file when its node has it (a local Ray), else from the copy a joined cluster
got through its runtime environment (``py_modules``). An entry's dice come from its name
(``agents.registry.policy_seed``), so where it plays changes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from agents.command import is_file_target
from tournaments.cli.common import CliError

AGENTS_HELP = (
    "a Python file (or dotted module) that registers entries of one's own, by top-level "
    "register(...) calls or a register_entries() function; their names then go wherever "
    "an entry name does (repeatable)"
)
HINT = "an entry of your own? pass --agents FILE.py"


@dataclass(frozen=True)
class AgentsModule:
    """One ``--agents`` module as this process loaded it: what a worker needs to load it
    too."""

    target: str  # the file's absolute path, or the dotted module name
    name: str  # its name in sys.modules
    root: str  # the folder on sys.path while it imports
    ship: str | None  # what a joined cluster gets (py_modules); None: installed there too
    entries: tuple[str, ...]  # the entry names it registered, in order
    sha256: str | None = None  # of the module's file as loaded (None: no file)

    @property
    def is_file(self) -> bool:
        return is_file_target(self.target)

    def record(self) -> dict:
        """What a run folder keeps of it (``ResultStore.record_agents``): which code its
        entries were."""
        return {"module": self.target, "entries": list(self.entries), "sha256": self.sha256}


# ---------------------------------------------------------------------- loading
def load_module(target: str, expected: str = "FILE.py", importable: bool = True) -> ModuleType:
    """The module of ``target``: a file (``path/to/f.py``) or a dotted module name. Every
    failure is a CliError naming the target (``expected``: what the command takes, for
    the message about a file that is no Python file). ``importable``: a file's name must
    be a module name (a Ray worker on another node imports the shipped copy by it)."""
    if is_file_target(target):
        return _load_file(Path(target), expected, importable)
    return _load_dotted(target)


def _load_file(path: Path, expected: str, importable: bool = True) -> ModuleType:
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    if path.suffix != ".py":
        raise CliError(f"{path}: not a Python file (expected {expected})")
    name, resolved = path.stem, path.resolve()
    if importable and not name.isidentifier():
        raise CliError(
            f"{path}: {name!r} is no module name (letters, digits and underscores, not "
            f"starting with a digit); rename the file, e.g. to {_identifier(name)}.py"
        )
    loaded = sys.modules.get(name)
    if loaded is not None:
        if _same_file(getattr(loaded, "__file__", None), resolved):
            return loaded  # this very file, imported before: its entries are registered
        raise CliError(_shadow_message(path, name, getattr(loaded, "__file__", None)))
    try:
        other = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        other = None
    if other is not None and not _same_file(other.origin, resolved):
        raise CliError(_shadow_message(path, name, other.origin))
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: not a Python file (expected {expected})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its classes pickle and its dataclasses resolve by name
    try:
        with _on_path(str(resolved.parent)):
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # the user's module: report, do not crash
        sys.modules.pop(name, None)
        raise CliError(f"{path}: importing it raised {_raised(err)}") from None
    return module


def _load_dotted(name: str, root: str | None = None) -> ModuleType:
    """``name`` imported from sys.path: with ``root`` first on it while it imports, else
    with the current folder on it (as ``python -m`` would)."""
    if not all(part.isidentifier() for part in name.split(".")):
        raise CliError(f"{name!r} is neither a FILE.py nor a dotted module name")
    if root is None and "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        with _on_path(root) if root is not None else contextlib.nullcontext():
            return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise CliError(f"cannot import {name!r}: {err}") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001
        raise CliError(f"importing {name!r} raised {_raised(err)}") from None


@contextlib.contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """``folder`` first on sys.path for the duration (then this entry is taken out again,
    wherever the import moved it)."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        for k, item in enumerate(sys.path):
            if item is entry:
                del sys.path[k]
                break


def _same_file(origin: str | None, path: Path) -> bool:
    if not origin:
        return False
    with contextlib.suppress(OSError):
        return Path(origin).resolve() == path
    return False


def _shadow_message(path: Path, name: str, origin: str | None) -> str:
    where = f" ({origin})" if origin else " (a built-in module)"
    return (
        f"{path}: its module name {name!r} is the name of another module here{where}, "
        f"which loading this file would replace; rename the file, e.g. to my_{name}.py"
    )


def _identifier(name: str) -> str:
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return text if text[:1].isalpha() or text[:1] == "_" else f"my_{text}"


def _raised(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return (
            f"SystemExit({err.code}): does it run a script when imported? put that under "
            '`if __name__ == "__main__":`'
        )
    return f"{type(err).__name__}: {err}"


# ---------------------------------------------------------------------- entries
def load_agents(target: str, imported_here: frozenset[str] = frozenset()) -> AgentsModule:
    """Import ``target`` (a file or a dotted module) and register its entries; CliError
    when it cannot be imported, its ``register_entries()`` raises, or it registers no
    entry. ``imported_here``: modules an earlier ``--agents`` module imported (its entries
    count as that module's; one given after it may then register nothing new)."""
    from agents import registry

    before = {e.name for e in registry.entries()}
    name = Path(target).stem if is_file_target(target) else target
    imported = name in sys.modules  # before now (given twice, or imported by another)
    module = load_module(target)
    _call_register_entries(module, target)
    names = [e.name for e in registry.entries()]
    new = tuple(n for n in names if n not in before)
    earlier = _LOADED.get(module.__name__)
    if earlier is not None:  # the same module again: what it registered then
        new = tuple(dict.fromkeys(earlier.entries + new))
    elif imported and not new:  # imported before: the entries of its own classes
        new = tuple(e.name for e in registry.entries() if _defined_in(e.factory, module))
    if not new and module.__name__ not in imported_here:
        raise CliError(
            f"{target}: registers no entry; call agents.registry.register(Entry(...)) at "
            "its top level or in a register_entries() function "
            "(docs/bring_your_own_agent.md)"
        )
    digest = _file_sha256(getattr(module, "__file__", None))
    if is_file_target(target):
        path = Path(module.__file__).resolve()
        loaded = AgentsModule(str(path), module.__name__, str(path.parent), str(path), new, digest)
    else:
        root, ship = _package_root(module)
        loaded = AgentsModule(target, module.__name__, root, ship, new, digest)
    _LOADED[module.__name__] = loaded
    return loaded


def _file_sha256(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _defined_in(factory, module: ModuleType) -> bool:
    return getattr(factory, "__module__", None) == module.__name__


_LOADED: dict[str, AgentsModule] = {}
"""The modules ``load_agents`` loaded in this process, by module name."""


def _call_register_entries(module: ModuleType, target: str) -> None:
    hook = getattr(module, "register_entries", None)
    if hook is None:
        return
    if not callable(hook):
        raise CliError(f"{target}: register_entries is not a function")
    try:
        hook()
    except Exception as err:  # noqa: BLE001 - the user's code: report, do not crash
        raise CliError(f"{target}: register_entries() raised {_raised(err)}") from None


def _package_root(module: ModuleType) -> tuple[str, str | None]:
    """The sys.path folder a dotted module was imported from, and what a joined cluster
    gets of it: its top-level package's folder (or file), nothing for an installed one."""
    top = sys.modules[module.__name__.partition(".")[0]]
    paths = list(getattr(top, "__path__", []) or [])
    where = Path(paths[0]) if paths else Path(top.__file__ or ".")
    installed = {"site-packages", "dist-packages"} & set(where.resolve().parts)
    return str(where.resolve().parent), None if installed else str(where.resolve())


def load_all(
    targets: Sequence[str] | None, where: str = "", before: Sequence[AgentsModule] = ()
) -> tuple[AgentsModule, ...]:
    """``load_agents`` on each ``--agents`` value, in order, after the modules ``before``
    (loaded already: kept first); each module once. ``where`` begins every error message
    (which file named the targets)."""
    out: dict[str, AgentsModule] = {m.name: m for m in before}
    start = set(sys.modules)
    for target in targets or ():
        try:
            loaded = load_agents(target, frozenset(sys.modules.keys() - start))
        except CliError as err:
            raise CliError(f"{where}{err}") from None
        out[loaded.name] = loaded
    return tuple(out.values())


def add_flag(p: argparse.ArgumentParser) -> None:
    """The ``--agents FILE.py`` flag of a command that names entries."""
    p.add_argument("--agents", action="append", metavar="FILE.py", type=_target, help=AGENTS_HELP)


def _target(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a FILE.py or a module name, got {text!r}")
    return text


_target.__name__ = "FILE.py or module name"


def hinted(err: BaseException, targets: Sequence[str] | None) -> str:
    """The message of an unknown-entry error, with a pointer to ``--agents`` when the
    command was given none."""
    text = str(err)
    return text if targets else f"{text} ({HINT})"


def names_unknown_entry(err: BaseException) -> bool:
    """Whether an error is, or was raised while handling, an unknown registry name (the
    spec's checks turn one into a SpecError)."""
    from agents.registry import UnknownEntry

    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, UnknownEntry):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# ---------------------------------------------------------------------- Ray workers
@contextlib.contextmanager
def ship(modules: Sequence[AgentsModule]) -> Iterator[None]:
    """For the duration, the Ray actors a run starts register ``modules``' entries first
    (``tournaments.raysession.worker_setup``); nothing changes when there are none."""
    if not modules:
        yield
        return
    from tournaments.raysession import worker_setup

    setup = functools.partial(register_in_worker, tuple(modules))
    py_modules = [m.ship for m in modules if m.ship]
    with worker_setup(setup, py_modules):
        yield


WORKER_FAILED = "on a Ray worker"
"""What ``register_in_worker``'s errors say, for ``worker_errors`` to find them."""


@contextlib.contextmanager
def worker_errors() -> Iterator[None]:
    """A Ray actor that could not load an ``--agents`` module (an import missing on a
    cluster's node) is one error line, not Ray's traceback."""
    try:
        yield
    except Exception as err:
        # Ray's error itself, or the cause of the run's own error about workers that did
        # not start (``tournaments.runner``).
        seen: BaseException | None = err
        while seen is not None and not type(seen).__module__.startswith("ray."):
            seen = seen.__cause__
        if seen is None:
            raise
        lines = [line.strip() for line in str(seen).splitlines() if WORKER_FAILED in line]
        if not lines:
            raise
        raise CliError(lines[-1].partition(": ")[2]) from None


_REGISTERED_HERE: set[str] = set()


def register_in_worker(modules: tuple[AgentsModule, ...]) -> None:
    """In a Ray actor's process: load each module as the driver did (the same file when
    this node has it, else the copy shipped to the cluster) and register its entries;
    a RuntimeError says which module failed and why."""
    from agents import registry

    for m in modules:
        if m.name in _REGISTERED_HERE:
            continue
        try:
            if m.is_file and Path(m.target).is_file():
                module = _load_file(Path(m.target), "FILE.py")
            else:  # shipped with py_modules (a joined cluster), or installed here
                module = _load_dotted(m.name, root=m.root if Path(m.root).is_dir() else None)
            _call_register_entries(module, m.target)
        except CliError as err:
            raise RuntimeError(f"--agents {m.target} {WORKER_FAILED}: {err}") from None
        known = {e.name for e in registry.entries()}
        missing = [n for n in m.entries if n not in known]
        if missing:
            raise RuntimeError(
                f"--agents {m.target} {WORKER_FAILED} registered no {', '.join(missing)}, "
                "which it registers here; register entries at the module's top level or in "
                "its register_entries()"
            )
        _REGISTERED_HERE.add(m.name)


__all__ = [
    "AGENTS_HELP",
    "AgentsModule",
    "add_flag",
    "hinted",
    "is_file_target",
    "load_agents",
    "load_all",
    "load_module",
    "names_unknown_entry",
    "register_in_worker",
    "ship",
    "worker_errors",
]
