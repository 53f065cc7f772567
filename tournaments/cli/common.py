"""What every command group shares: the user-error type, argument types, small printers."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterable

from agents.command import nonneg_int, pos_int, pos_number  # noqa: F401 - the commands' flag types
from arena.words import plural  # noqa: F401 - the commands count in words


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless it has none, or says it already); a
    description keeps its own line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with the arena's errors: one ``arena: error: ...`` line naming the flag,
    exit code 2, no usage block (``--help`` shows it)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"arena: error: {message} (see: {self.prog} --help)\n")


def nonempty(text: str) -> str:
    """A flag's value that may not be blank: an empty one would read as the flag not given
    (its default) without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty value, got {text!r}")
    return text


nonempty.__name__ = "non-empty value"  # what argparse calls the type in its messages


def market_index(text: str) -> int:
    """A market index flag: a non-negative integer that the generator draws and a store
    holds (``arena.generator.MAX_INDEX``, 2**63 - 1)."""
    from arena.generator import MAX_INDEX

    value = nonneg_int(text)
    if value > MAX_INDEX:
        raise argparse.ArgumentTypeError(f"a market index is at most {MAX_INDEX:,}, got {text}")
    return value


market_index.__name__ = "market index"


def output_file(suffix: str):
    """A flag naming a file to write, FILE``suffix`` (the rule of ``export --to``): never
    blank, nor a file of another kind (a run's results.sqlite), nor a link to one."""

    def parse(text: str) -> str:
        if not text.endswith(suffix):
            raise argparse.ArgumentTypeError(f"expected a path ending in {suffix}, got {text!r}")
        if not os.path.realpath(text).endswith(suffix):
            raise argparse.ArgumentTypeError(
                f"{text} links to {os.path.realpath(text)}, not a {suffix} file"
            )
        return text

    parse.__name__ = f"FILE{suffix}"
    return parse


def at_most(limit: int, what: str):
    """A positive integer flag of at most ``limit`` (the message names the limit)."""

    def parse(text: str) -> int:
        value = pos_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:,} {what}, got {value:,}")
        return value

    parse.__name__ = "positive integer"  # what argparse calls the type in its messages
    return parse


def pos_float(text: str) -> float:
    """A positive number of seconds (``--connect-timeout``)."""
    try:
        return pos_number(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds, got {text!r}"
        ) from None


def number(x: float, digits: int = 2) -> str:
    """A figure for the terminal; ``n/a`` for NaN."""
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def json_safe(x):
    """NaN as null, tuples as lists: what ``json.dumps`` can write as plain JSON."""
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x


def _indent(who: str, text: str) -> str:
    lines = text.splitlines() or [""]
    return "\n".join(
        f"  {who:>9} | {line}" if k == 0 else f"  {'':>9} | {line}" for k, line in enumerate(lines)
    )


def print_transcript(turns: Iterable[dict]) -> None:
    """Every turn of a transcript (``TurnRecord.to_dict()`` records, as stored): the raw text
    of each message, its violations, trades and departures. Anything else is a ValueError
    before a line is printed."""
    from tournaments.store import transcript_problem

    turns = list(turns)
    problem = transcript_problem(turns)
    if problem is not None:
        raise ValueError(f"not a transcript: {problem}")
    for rec in turns:
        print(f"--- turn {rec['turn']} " + "-" * 50)
        print(_indent("seller", rec["seller_text"]))
        if rec["seller_violation"] != "ok":
            print(f"  ! seller violation: {rec['seller_error']}")
        if rec["buyer"] >= 0:
            print(_indent(f"buyer {rec['buyer']}", rec["buyer_text"]))
            if rec["buyer_violation"] != "ok":
                print(f"  ! buyer violation: {rec['buyer_error']}")
        if rec["trade"]:
            t = rec["trade"]
            print(f"  => trade: buyer {t['buyer']} buys product {t['product']} at {t['price']:.2f}")
        if rec["buyer_left"]:
            print(f"  => buyer {rec['buyer']} leaves")


class Steps:
    """A progress line over the named steps of a longer piece of work, on stderr; gone once
    the work is done. ``steps("what")`` starts the next step."""

    def __init__(self, total: int, enabled: bool = True, desc: str = "") -> None:
        self._bar = None
        self._total = total
        self._n = 0
        self._desc = desc
        if enabled:
            import sys

            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=desc,
                file=sys.stderr,
                leave=False,
                dynamic_ncols=True,
                bar_format="{desc} [{elapsed}]",
                disable=None,  # none where stderr is no terminal
            )

    def __call__(self, what: str) -> None:
        if self._bar is None:
            return
        self._n = min(self._n + 1, self._total)
        self._bar.set_description_str(f"{self._desc} {self._n}/{self._total}: {what}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
