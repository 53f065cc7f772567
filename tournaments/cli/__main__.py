"""``python -m tournaments.cli``: the ``arena`` command."""

from __future__ import annotations

import sys

from tournaments.cli import main

sys.exit(main())
