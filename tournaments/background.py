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
import threading
from typing import Any

_CHILD = "from tournaments.background import _child; _child()"


def _resolve(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


class Background:
    """``target(*args, **kwargs)`` (``target`` = "module:function") in a second process.

    The call goes to the child through its standard input and the result comes back
    through its standard output (pipes between the two processes; nothing is written to
    disk). A thread feeds the call, so this process goes on while the child starts."""

    def __init__(self, target: str, *args: Any, **kwargs: Any) -> None:
        self._call = (target, args, kwargs)
        self._proc: subprocess.Popen | None = None
        self._feed: threading.Thread | None = None
        try:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self._proc = None
            return
        data = pickle.dumps(self._call, protocol=pickle.HIGHEST_PROTOCOL)
        self._feed = threading.Thread(target=self._send, args=(data,), daemon=True)
        self._feed.start()

    def _send(self, data: bytes) -> None:
        proc = self._proc
        try:
            proc.stdin.write(data)
            proc.stdin.close()
        except (OSError, ValueError):  # the child is gone: result() makes the call here
            pass

    def result(self) -> Any:
        """The call's return value (made here if the child did not deliver it)."""
        proc = self._proc
        if proc is not None:
            self._feed.join()
            out = proc.stdout.read()
            proc.stdout.close()
            if proc.wait() == 0:
                return pickle.loads(out)
        target, args, kwargs = self._call
        return _resolve(target)(*args, **kwargs)

    def __del__(self) -> None:
        # Never collected (the caller failed first): stop the child.
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _child() -> None:
    target, args, kwargs = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(_resolve(target)(*args, **kwargs)))
