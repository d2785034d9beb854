"""A lost run's thread: its log in Redis assembled as its executor would have, then its end.

When a run's executor dies (or loses its lease), the replica that takes the run over ends it
with ``RUN_ERROR``. A client that followed the run applied every event of its log and then that
error, and the official client keeps the partial messages; so the thread saved at the end is
the run's log assembled into the stored thread by the same stages an executor runs
(:class:`~agui_meta.DefaultStages`: verify, accumulate, ledger), followed by the closing events.

The log is read in pages (it holds at most the run's ``max_events``, as every run log). An entry
that is not one event the stages accept (corrupt, or an event out of order) is reported, naming
the stream and the entry's id: the thread is saved with the events before it, then the closing
events, as a client that stopped there would hold it. A log whose first events were trimmed (a
run longer than ``max_events``) cannot be assembled: the thread records the error only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import redis.asyncio

from .._decode import Enforce
from .._defaults import DefaultStages
from .._driver import Runner
from .._events import Event, RunErrorEvent, RunStartedEvent
from .._exceptions import AguiMetaError, DataError
from .._framing import Frame, SSEDecoder
from .._ledger import Ledger
from .._stage import Context
from .._threads import ThreadSnapshot
from ._common import text
from ._replay import entry_fields, entry_index

__all__ = ["LostRun", "assemble_lost_run"]

logger = logging.getLogger("agui_meta.gateway")

#: Entries read from a run's log at a time.
PAGE = 256


def _discard(item: Any) -> None:
    pass


class LostRun:
    """What a takeover commits: the events closing the log, the thread, the run's usage."""

    __slots__ = ("closing", "snapshot", "usage")

    def __init__(
        self, closing: list[Event], snapshot: ThreadSnapshot, usage: Sequence[Any]
    ) -> None:
        #: What the log gets after its events (nothing when the log ended the run already).
        self.closing = closing
        self.snapshot = snapshot
        self.usage = list(usage)


def _frame_of(raw: Any) -> Frame:
    """The one frame of a log entry's ``d`` field, or :class:`DataError` saying why not."""
    fields = entry_fields(raw) if hasattr(raw, "items") else {}
    data = fields.get("d")
    if data is None:
        raise DataError(f"it has no event (fields {sorted(fields)[:8]!r})")
    chunk = data if isinstance(data, bytes) else str(data).encode()
    decoder = SSEDecoder()
    frames = [f for f in [*decoder.feed(chunk), *decoder.close()] if f.data]
    if len(frames) != 1:
        raise DataError(f"it holds {len(frames)} SSE events, not one")
    return frames[0]


async def assemble_lost_run(
    client: redis.asyncio.Redis,
    stream: str,
    index: int,
    base: ThreadSnapshot,
    *,
    thread_id: str,
    run_id: str,
    code: str,
    message: str,
) -> LostRun:
    """The end of a run taken over after ``index`` events of its log ``stream``: its thread
    (``base`` advanced by the log's events and the closing ones) and the closing events."""
    stages = DefaultStages(base.to_store(), ledger=Ledger())
    runner = Runner([Enforce(), *stages], Context(), sink=_discard)
    await _feed_log(client, stream, index, runner, run_id, thread_id)
    verify = stages.verify
    assert verify is not None
    state = verify.open_items().run
    closing: list[Event] = []
    if index == 0:  # nothing in the log: the run's start first, as a reader needs it
        closing.append(RunStartedEvent(thread_id=thread_id, run_id=run_id))
    if state not in ("finished", "errored"):  # else its log ended it: only the commit was lost
        closing.append(RunErrorEvent(message=message, code=code))
    try:
        if state == "none" and index > 0:  # its start is unreadable: the ledger needs one
            runner.feed(RunStartedEvent(thread_id=thread_id, run_id=run_id))
        for event in closing:
            runner.feed(event)
        runner.close()
    except (AguiMetaError, DataError) as exc:  # the stages refuse the end: the error only
        logger.error(
            "run %s of thread %s: its end cannot follow its log: %s", run_id, thread_id, exc
        )
        stages = DefaultStages(base.to_store(), ledger=Ledger())
        runner = Runner([Enforce(), *stages], Context(), sink=_discard)
        runner.feed(RunStartedEvent(thread_id=thread_id, run_id=run_id))
        runner.feed(RunErrorEvent(message=message, code=code))
        runner.close()
    ledger = stages.ledger
    ledger.close()
    usage = [u for record in ledger.runs for u in record.usage]
    return LostRun(closing, base.advance(stages.store, ledger.runs), usage)


async def _feed_log(
    client: redis.asyncio.Redis,
    stream: str,
    index: int,
    runner: Runner,
    run_id: str,
    thread_id: str,
) -> bool:
    """Feed entries ``0-1`` to ``0-index`` of ``stream`` to ``runner``, a page at a time, up to
    the first that cannot be fed (reported). Whether every entry was fed."""
    expected = 1
    while expected <= index:
        page = await client.xrange(stream, min=f"0-{expected}", max=f"0-{index}", count=PAGE)
        if not page:
            break
        for entry_id, raw in page:
            where = f"entry {text(entry_id)} of stream {stream!r}"
            try:
                if entry_index(entry_id) != expected:
                    logger.error(
                        "run %s of thread %s: events before %s were trimmed from its log: its "
                        "thread records its error only",
                        run_id,
                        thread_id,
                        where,
                    )
                    return False
                runner.feed(_frame_of(raw))
            except (AguiMetaError, DataError, ValueError) as exc:
                logger.error(
                    "run %s of thread %s: %s cannot be read: %s; its thread is saved with the "
                    "events before it",
                    run_id,
                    thread_id,
                    where,
                    exc,
                )
                return False
            expected += 1
    if expected <= index:
        logger.error(
            "run %s of thread %s: stream %r ends before its event %d: its thread is saved with "
            "the events before it",
            run_id,
            thread_id,
            stream,
            expected,
        )
        return False
    return True
