"""The torch device a ``--device`` flag names, checked before any weights move."""

from __future__ import annotations

import torch


def torch_device(text: str) -> torch.device:
    """The device ``text`` names ("cpu", "cuda", "cuda:1"), or a ``ValueError`` saying why
    this machine cannot use it: torch's own error for a CUDA device it lacks is an
    assertion raised from deep inside the first ``.to``."""
    try:
        device = torch.device(text)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {text}: expected cpu, cuda or cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {text}: no CUDA device is available here")
        if device.index is not None and device.index >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise ValueError(f"--device {text}: this machine has {count} CUDA device(s)")
    return device


__all__ = ["torch_device"]
