"""The stages of the default pipeline, as the benchmarks build them.

The full default pipeline is ``decode (+ enforce, implicit in wrap) → expand_chunks → verify →
Accumulate(store) → ledger``; :data:`LEVELS` names the prefixes of it that the stage-by-stage
contenders run.
"""

from __future__ import annotations

from typing import Any

import agui_meta

_verify = agui_meta.Verify

#: How many stages (after decoding) each level adds, in pipeline order.
LEVELS = ("decode", "+expand_chunks", "+verify", "+accumulate", "+ledger")


def stages(level: int = len(LEVELS) - 1, *, store: Any = None) -> list[Any]:
    """The stages after decoding, up to ``LEVELS[level]`` (the full pipeline by default)."""
    out: list[Any] = []
    if level >= 1:
        out.append(agui_meta.ExpandChunks())
    if level >= 2:
        out.append(_verify())
    if level >= 3:
        out.append(agui_meta.Accumulate(store if store is not None else agui_meta.Store()))
    if level >= 4:
        out.append(agui_meta.Ledger())
    return out


def sync_chain(level: int = len(LEVELS) - 1, *, store: Any = None) -> list[Any]:
    """The same stages for ``run_sync``: the decoding stage first, made explicit."""
    return [agui_meta.Enforce(), *stages(level, store=store)]
