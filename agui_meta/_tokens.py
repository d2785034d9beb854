"""Token usage as agui-meta reports it: :class:`Usage`, and the sum per provider and model.

The wire entry (:class:`agui_meta.events.TokenUsage`, in RUN_FINISHED and RUN_ERROR) says
``UNSET`` for what the producer left out, like every wire type. What agui-meta builds from
it (ledger records, run results, meter totals, thread summaries) holds :class:`Usage`, where
absent is ``None``; both encode to the same JSON (camelCase, absent members omitted).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

import msgspec
from msgspec import UNSET

from ._events import TokenUsage

__all__ = ["COUNTS", "Usage", "aggregate_token_usage"]

#: The six token counts of a usage entry, in wire order.
COUNTS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
)


class Usage(msgspec.Struct, kw_only=True, frozen=True, rename="camel", omit_defaults=True):
    """Token counts of a provider and model; ``None`` for a label or count nobody reported.

    Counts keep AG-UI's meaning: ``input_tokens`` includes the cached and cache-written input,
    ``output_tokens`` includes ``reasoning_tokens``. A count that is ``None`` was not reported,
    which is not zero.

    >>> from agui_meta.events import TokenUsage
    >>> usage = Usage.from_wire(TokenUsage(model="m", input_tokens=3))
    >>> usage.provider, usage.model, usage.input_tokens, usage.output_tokens
    (None, 'm', 3, None)
    """

    provider: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None

    @classmethod
    def from_wire(cls, entry: TokenUsage | Usage) -> Usage:
        """The entry as agui-meta reports it (an entry that is a :class:`Usage` already, itself)."""
        if isinstance(entry, Usage):
            return entry
        # Field by field (TokenUsage's eight fields are Usage's: tests/test_tokens.py checks).
        unset = UNSET
        provider, model = entry.provider, entry.model
        i, o, t = entry.input_tokens, entry.output_tokens, entry.total_tokens
        r, c, w = entry.reasoning_tokens, entry.cached_input_tokens, entry.cache_write_input_tokens
        return cls(
            provider=None if provider is unset else provider,
            model=None if model is unset else model,
            input_tokens=None if i is unset else i,
            output_tokens=None if o is unset else o,
            total_tokens=None if t is unset else t,
            reasoning_tokens=None if r is unset else r,
            cached_input_tokens=None if c is unset else c,
            cache_write_input_tokens=None if w is unset else w,
        )


def _opt(value: Any) -> Any:
    return None if value is UNSET else value


def aggregate_token_usage(entries: Iterable[TokenUsage | Usage]) -> list[Usage]:
    """Sum usage entries into one entry per ``(provider, model)``, in order of first appearance.

    The rules of the reference's ``aggregateTokenUsage``: an absent provider or model groups
    with an empty one, and the group keeps the labels of its first entry; a count stays absent
    (``None``) when no entry of the group reported it, so "not reported" stays distinct from
    zero. (The reference joins the two labels with a space to make its group key, so it would
    also merge provider ``"a b"``/model ``"c"`` with provider ``"a"``/model ``"b c"``; here the
    pair is the key, as its documentation says.) Sums are exact Python integers. Takes wire
    entries (:class:`agui_meta.events.TokenUsage`) and :class:`Usage` alike.

    >>> import msgspec
    >>> from agui_meta.events import TokenUsage
    >>> entries = [TokenUsage(model="m", input_tokens=1),
    ...            TokenUsage(model="m", input_tokens=2, output_tokens=5)]
    >>> msgspec.json.encode(aggregate_token_usage(entries))
    b'[{"model":"m","inputTokens":3,"outputTokens":5}]'
    """
    if type(entries) is list and len(entries) == 1:
        # One entry is its own sum: the same Usage (frozen, so it may be shared).
        return [Usage.from_wire(entries[0])]
    # Each group: [provider, model, six sums], a sum None until an entry reports its count.
    groups: dict[tuple[str, str], list[Any]] = {}
    unset = UNSET
    for values in map(_LABELS_AND_COUNTS, entries):
        provider, model = values[0], values[1]
        if provider is unset:
            provider = None
        if model is unset:
            model = None
        key = ("" if provider is None else provider, "" if model is None else model)
        group = groups.get(key)
        if group is None:
            group = groups[key] = [provider, model, None, None, None, None, None, None]
        for i in range(2, 8):
            value = values[i]
            if value is not unset and value is not None:
                total = group[i]
                group[i] = value if total is None else total + value
    return [
        Usage(
            provider=g[0],
            model=g[1],
            input_tokens=g[2],
            output_tokens=g[3],
            total_tokens=g[4],
            reasoning_tokens=g[5],
            cached_input_tokens=g[6],
            cache_write_input_tokens=g[7],
        )
        for g in groups.values()
    ]


#: An entry's labels and its six counts, in wire order (one call for the eight).
_LABELS_AND_COUNTS = attrgetter("provider", "model", *COUNTS)
