"""The fused fast path of the built-in stages, for the events that make up most of a stream.

About nine events in ten are content deltas (``TEXT_MESSAGE_CONTENT``,
``REASONING_MESSAGE_CONTENT``, ``TOOL_CALL_ARGS``) of an item that is open and being streamed.
For those, the chain ``enforce → expand_chunks → verify → accumulate → ledger`` does little in
each stage (expand_chunks: nothing while no chunk stream is open; verify: "is it open?";
accumulate: append the delta; ledger: count it) but costs a Python call or two per stage.

:func:`fuse` recognises such a run of built-in stages (exact classes, in that order, connected
one to the next) when a chain is connected, and returns one feed function for its head. For a
content delta, it tests each stage's precondition for doing nothing beyond the common case,
*reading* their state only, and if every one holds, applies the accumulate handler and counts
the event in one step. Anything else (every other event, or a content delta where a
precondition fails: a chunk stream open, a run not started, an id not open, a subagent tag, no
open ledger run) goes through the stages one by one, unchanged. The stages stay the only
holders of state, so the two paths cannot drift apart; ``tests/test_fuse.py`` compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec import UNSET

from ._accumulate import Accumulate
from ._chunks import ExpandChunks
from ._decode import Enforce
from ._events import ReasoningMessageContentEvent, TextMessageContentEvent, ToolCallArgsEvent
from ._fastdecode import fast_decode
from ._framing import Frame
from ._ledger import Ledger
from ._stage import Transducer
from ._verify import Verify

__all__ = ["fuse"]

#: Set to False to connect every stage separately (the tests compare both ways).
ENABLED = True


def fuse(chain: list[Transducer[Any, Any]], start: int) -> Callable[[Any], None] | None:
    """The fused feed of the run of built-in stages at ``chain[start]``, if one starts there.

    A run is ``Enforce, ExpandChunks, Verify, Accumulate`` and maybe ``Ledger``, of exactly
    these classes (a subclass may change what a stage does). The stages must be connected
    already (their ``emit`` set): the fused feed sends what it does not handle itself to them,
    and its outputs to the last one's ``emit``.
    """
    if not ENABLED:
        return None
    kinds = [type(t) for t in chain[start : start + 5]]
    if kinds[:4] != _RUN:
        return None
    run: Any = chain[start : start + 5]  # the classes are checked
    ledger = run[4] if kinds[4:] == [Ledger] else _NoLedger(run[3].emit)
    return _fused(run[0], run[1], run[2], run[3], ledger)


_RUN: list[type] = [Enforce, ExpandChunks, Verify, Accumulate]


class _NoLedger:
    """Stands in for a ledger in a run without one: counts nothing anyone reads."""

    def __init__(self, emit: Callable[[Any], None]) -> None:
        self.emit = emit
        self._counts: dict[str, int] = {}


def _fused(
    enforce: Enforce,
    expand: ExpandChunks,
    verify: Verify,
    accumulate: Accumulate,
    ledger: Ledger[Any] | _NoLedger,
) -> Callable[[Any], None]:
    slow_frame = enforce.feed  # decoding's slow path, then every stage
    slow_event = expand.feed  # a decoded event through every stage
    sink = ledger.emit
    lanes = expand._lanes
    # Per content class: the verifier's open ids of its kind, and the accumulate handler.
    plan: dict[type, tuple[dict[str, Any], Callable[[Any], Any]]] = {
        TextMessageContentEvent: (verify._text, accumulate._text_content),
        ReasoningMessageContentEvent: (verify._reasoning_messages, accumulate._text_content),
        ToolCallArgsEvent: (verify._tool_calls, accumulate._tool_args),
    }
    get_plan = plan.get
    decode = fast_decode

    def feed(item: Any) -> None:
        # Enforce.feed's fast path; anything it does not take goes to Enforce.feed itself,
        # which decodes again on its own path and says what is wrong, and where.
        if type(item) is Frame:
            event: Any = decode(item.data)
        elif type(item) is bytes:
            event = decode(item)
        else:
            slow_frame(item)
            return
        if event is None:
            slow_frame(item)
            return
        cls = type(event)
        entry = get_plan(cls)
        counts = ledger._counts
        if (
            entry is None
            or lanes  # a chunk stream is open: expand_chunks may close it first
            or verify._gate  # no run yet, or the run ended
            or event.subagent_run_id is not UNSET  # verify checks the owner
            or counts is None  # the ledger opens a run
            or (event.tool_call_id if cls is ToolCallArgsEvent else event.message_id)
            not in entry[0]  # not open: verify raises
        ):
            slow_event(event)
            return
        sink(entry[1](event))
        kind = cls.type
        counts[kind] = counts.get(kind, 0) + 1

    return feed
