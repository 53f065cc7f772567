"""``arena league``: rounds of learners against frozen pools. Not built yet.

This module is where the league command group goes: an ``add_commands(sub)`` that adds
``league`` with its sub-commands, registered in ``tournaments.cli.GROUPS``.
"""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """No commands yet."""
