"""``--prices FILE``: a price table (JSON or TOML, :class:`agui_meta.PriceTable`) for costs."""

from __future__ import annotations

import argparse

from .._exceptions import PriceTableError
from .._prices import PriceTable

__all__ = ["PriceTableError", "add_prices_argument", "cost_text", "load_prices"]


def add_prices_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table (JSON or TOML: per provider and model, input, output, cache read, "
        "cache write and reasoning per million tokens) to show what the usage cost",
    )


def load_prices(args: argparse.Namespace) -> PriceTable | None:
    """The table ``--prices`` names, or ``None``; raises :class:`PriceTableError`."""
    path = getattr(args, "prices", None)
    return PriceTable.load(path) if path else None


def cost_text(cost: float, currency: str) -> str:
    return f"cost {cost:.6f} {currency}"
