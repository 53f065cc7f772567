"""A function call run in a second Python process while this one goes on.

An analysis has one long sequential computation (Elo over shuffled orders); on a
machine with a spare core it runs beside the rest. ``Background("module:function",
*args)`` starts the call at once; ``result()`` waits for it. The child runs the same
code (this process's import path) on the same arguments, so the result is the one the
call gives in-process, and if the child cannot start or fails, ``result()`` makes the
call here instead: a background call changes when a result is ready, never what it is.
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any

_CHILD = "import sys; from tournaments.background import _child; _child(sys.argv[1])"


def _resolve(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


class Background:
    """``target(*args, **kwargs)`` (``target`` = "module:function") in a second process."""

    def __init__(self, target: str, *args: Any, **kwargs: Any) -> None:
        self._call = (target, args, kwargs)
        self._proc: subprocess.Popen | None = None
        fd, self._path = tempfile.mkstemp(suffix=".call")
        try:
            # Arguments go through a file: a pipe would block this process until the child
            # has read them.
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(self._call, fh, protocol=pickle.HIGHEST_PROTOCOL)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, self._path],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self._proc = None

    def result(self) -> Any:
        """The call's return value (made here if the child did not deliver it)."""
        try:
            if self._proc is not None:
                out, _ = self._proc.communicate()
                if self._proc.returncode == 0:
                    return pickle.loads(out)
        finally:
            if os.path.exists(self._path):
                os.unlink(self._path)
        target, args, kwargs = self._call
        return _resolve(target)(*args, **kwargs)

    def __del__(self) -> None:
        # Never collected (the caller failed first): stop the child, drop the arguments.
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        path = getattr(self, "_path", None)
        if path is not None and os.path.exists(path):
            os.unlink(path)


def _child(path: str) -> None:
    with open(path, "rb") as fh:
        target, args, kwargs = pickle.load(fh)
    sys.stdout.buffer.write(pickle.dumps(_resolve(target)(*args, **kwargs)))
