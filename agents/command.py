"""What the project's commands share for bad input: one ``PROG: error: ...`` line and
exit code 2 instead of a traceback (``arena`` and the ``python -m agents.lm.*`` modules
alike)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable


def one_line(err: BaseException) -> str:
    """The error as one line; an OSError as "FILE: reason" (not "[Errno 30] ...")."""
    if isinstance(err, OSError) and err.strerror:
        text = f"{err.filename}: {err.strerror.lower()}" if err.filename else err.strerror
    else:
        text = str(err) or type(err).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines) if lines else type(err).__name__


def is_user_error(err: BaseException) -> bool:
    """Errors that are the user's input (or a run that cannot go on), not a bug."""
    if isinstance(err, ValueError | OSError | sqlite3.Error | RuntimeError):
        return True
    # The registry is imported only by commands that build policies.
    registry = sys.modules.get("agents.registry")
    return registry is not None and isinstance(err, registry.UnknownEntry)


def where_raised(err: BaseException) -> str:
    """Where ``err`` was raised in code of one's own (a policy class, an ``--agents``
    module): the deepest frame of its traceback outside this project's packages, Python's
    and the installed libraries, as `` (at FILE:LINE, in FUNC)``; "" if there is none. A
    Ray task's error carries its remote traceback as text (in its message), read too."""
    import re
    import sysconfig
    import traceback
    from pathlib import Path

    ours = Path(__file__).resolve().parents[1]
    skip = [ours / "arena", ours / "agents", ours / "tournaments"]
    skip += [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "purelib", "platlib")]
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(err.__traceback__)]
    if type(err).__module__.startswith("ray."):  # the remote traceback, as text
        remote = getattr(err, "traceback_str", None) or str(err)
        frames += re.findall(r'File "([^"]+)", line (\d+), in (\S+)', remote)
    for filename, line, name in reversed(frames):
        if filename.startswith("<"):  # <string>, <frozen ...>: no file of one's own
            continue
        if not any(Path(filename).resolve().is_relative_to(d) for d in skip):
            return f" (at {filename}:{line}, in {name})"
    return ""


def is_file_target(text: str) -> bool:
    """Whether code to load names a file (``path/to/f.py``) rather than a dotted module
    (``my_lab.agents``): ``--agents`` values and a spec's ``agents``."""
    return text.endswith(".py") or "/" in text or os.sep in text


def run_guarded(prog: str, body: Callable[[], int]) -> int:
    """``body()``, with a user error printed as one ``PROG: error: ...`` line (exit code
    2) and an interrupt as ``PROG: interrupted`` (130); a bug still raises."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if not is_user_error(err):
            raise
        print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
        return 2


def pos_int(text: str) -> int:
    """A positive integer flag; 0 and -5 get the same message."""
    value = _int(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonneg_int(text: str) -> int:
    value = _int(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def pos_number(text: str) -> float:
    """A positive, finite number flag (a rate, a scale, seconds)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def nonneg_number(text: str) -> float:
    """A non-negative, finite number flag (a temperature: 0 is greedy)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def differing_keys(saved: object, now: object, prefix: str = "") -> list[str]:
    """The dotted keys where two JSON-like values differ (``sft.schedule``, ``opponents``),
    for an error that says why a run folder was started with another config."""
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(saved) | set(now), key=str):
            key = f"{prefix}{k}"
            if k not in saved or k not in now:
                out.append(key)
            else:
                out += differing_keys(saved[k], now[k], f"{key}.")
        return out
    return [] if saved == now else [prefix.removesuffix(".") or "(the whole config)"]


def config_mismatch(folder: object, saved: dict, now: dict, limit: int = 6) -> str:
    """The refusal of a resume: FOLDER was started with another config (it differs in
    a, b.c, ...); a key whose values are plain (a number, a string) shows both, so that a
    flag given at the start and not now (``--iterations``) says what to pass again."""
    keys = differing_keys(saved, now)
    parts = []
    for key in keys[:limit]:
        was, got = _at(saved, key), _at(now, key)
        plain = (str, int, float, bool, type(None))
        if isinstance(was, plain) and isinstance(got, plain) and was is not _MISSING:
            parts.append(f"{key}: {json.dumps(was)} at the start, {json.dumps(got)} now")
        else:
            parts.append(key)
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return f"{folder} was started with another config (it differs in {'; '.join(parts)}{more})"


_MISSING = object()


def _at(data: object, key: str) -> object:
    """The value at a dotted key of ``differing_keys`` (``_MISSING`` where there is none)."""
    for part in key.split("."):
        if not isinstance(data, dict):
            return _MISSING
        match = [k for k in data if str(k) == part]
        if not match:
            return _MISSING
        data = data[match[0]]
    return data
