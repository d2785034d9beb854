"""Prices per provider and model, and the cost of token usage (no network, no built-in prices).

A :class:`PriceTable` maps a provider and model to a :class:`Price`: what ``per_tokens`` tokens
(a million by default) of each kind cost, in the table's ``currency``. agui-meta ships no
prices — they change, and differ by contract — so a table is the application's, built in
Python or loaded from a JSON or TOML file (:meth:`PriceTable.load`)::

    currency = "USD"
    per_tokens = 1000000

    [[prices]]
    provider = "anthropic"
    model = "claude-sonnet-4"
    input = 3.0
    output = 15.0
    cache_read = 0.3
    cache_write = 3.75

(the JSON form has the same keys: ``{"currency": "USD", "prices": [{...}]}``). ``provider``
``"*"`` (the default) prices a model whatever its provider; an exact provider/model entry wins.

The cost of a usage entry follows AG-UI's counts, where ``inputTokens`` include the cached and
cache-written input and ``outputTokens`` the reasoning: the uncached input at ``input``, cached
input at ``cache_read``, cache-written input at ``cache_write`` (both ``input`` when not given),
the rest of the output at ``output`` and reasoning at ``reasoning`` (``output`` when not given).
An entry whose provider/model has no price has no cost (``None``, never 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ._exceptions import PriceTableError

__all__ = ["Price", "PriceTable"]


class Price(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """What ``per_tokens`` tokens of each kind cost for one provider (``"*"``: any) and model."""

    model: str
    provider: str = "*"
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    reasoning: float | None = None


class _File(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    currency: str = "USD"
    per_tokens: int = 1_000_000
    prices: list[Price] = msgspec.field(default_factory=list)


def _count(usage: Any, field: str) -> int:
    value = getattr(usage, field, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class PriceTable:
    """Prices by provider and model (see the module documentation).

    >>> from agui_meta.events import TokenUsage
    >>> table = PriceTable([Price(model="m", input=2.0, output=8.0, cache_read=0.5)])
    >>> table.cost(TokenUsage(provider="p", model="m", input_tokens=1_000_000,
    ...                       cached_input_tokens=500_000, output_tokens=250_000))
    3.25
    >>> table.cost(TokenUsage(model="other", input_tokens=10)) is None
    True
    """

    def __init__(
        self, prices: Iterable[Price] = (), *, currency: str = "USD", per_tokens: int = 1_000_000
    ) -> None:
        if per_tokens < 1:
            raise PriceTableError(f"<table>: per_tokens must be at least 1, got {per_tokens}")
        self.currency = currency
        self.per_tokens = per_tokens
        self._prices: dict[tuple[str, str], Price] = {}
        for i, price in enumerate(prices):
            for field in ("input", "output", "cache_read", "cache_write", "reasoning"):
                value = getattr(price, field)
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise PriceTableError(
                        f"<table>: prices[{i}] ({price.provider}/{price.model}): {field} must be "
                        f"a finite number >= 0, got {value}"
                    )
            self._prices[(price.provider, price.model)] = price

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """A table from a ``.json`` or ``.toml`` file (TOML needs Python 3.11, or ``tomli``)."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PriceTableError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        try:
            if path.suffix.lower() == ".toml":
                parsed = msgspec.toml.decode(data, type=_File)
            else:
                parsed = msgspec.json.decode(data, type=_File)
        except (msgspec.DecodeError, msgspec.ValidationError, ImportError) as exc:
            raise PriceTableError(f"{path}: {exc}") from exc
        try:
            return cls(parsed.prices, currency=parsed.currency, per_tokens=parsed.per_tokens)
        except PriceTableError as exc:
            raise PriceTableError(str(exc).replace("<table>", str(path), 1)) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PriceTable:
        """A table from the file's shape, as Python data."""
        try:
            parsed = msgspec.convert(data, type=_File)
        except msgspec.ValidationError as exc:
            raise PriceTableError(f"<table>: {exc}") from exc
        return cls(parsed.prices, currency=parsed.currency, per_tokens=parsed.per_tokens)

    def __len__(self) -> int:
        return len(self._prices)

    def price(self, provider: object, model: object) -> Price | None:
        """The price of ``model`` from ``provider`` (absent labels read as ``""``)."""
        p = provider if isinstance(provider, str) else ""
        m = model if isinstance(model, str) else ""
        found = self._prices.get((p, m))
        return found if found is not None else self._prices.get(("*", m))

    def cost(self, usage: Any) -> float | None:
        """The cost of one usage entry (a :class:`~agui_meta.events.TokenUsage` or anything
        with its fields), ``None`` when its provider/model has no price."""
        price = self.price(getattr(usage, "provider", None), getattr(usage, "model", None))
        if price is None:
            return None
        total_in = _count(usage, "input_tokens")
        cached = _count(usage, "cached_input_tokens")
        written = _count(usage, "cache_write_input_tokens")
        total_out = _count(usage, "output_tokens")
        reasoning = _count(usage, "reasoning_tokens")
        read_price = price.input if price.cache_read is None else price.cache_read
        write_price = price.input if price.cache_write is None else price.cache_write
        reasoning_price = price.output if price.reasoning is None else price.reasoning
        amount = (
            max(total_in - cached - written, 0) * price.input
            + cached * read_price
            + written * write_price
            + max(total_out - reasoning, 0) * price.output
            + reasoning * reasoning_price
        )
        return amount / self.per_tokens

    def total(self, entries: Iterable[Any]) -> float | None:
        """The cost of several entries: the sum of those priced, ``None`` when none is."""
        found: float | None = None
        for entry in entries:
            cost = self.cost(entry)
            if cost is not None:
                found = cost if found is None else found + cost
        return found
