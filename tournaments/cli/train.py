"""``arena train seller|buyer``: training commands. Not built yet.

This module is where the training command group goes: an ``add_commands(sub)`` that
adds ``train`` with its sub-commands, registered in ``tournaments.cli.GROUPS``.
"""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """No commands yet."""
