"""What every command group shares: the user-error type, argument types, small printers."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def pos_int(text: str) -> int:
    value = nonneg_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


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
    of each message, its violations, trades and departures."""
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
