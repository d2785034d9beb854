"""The errors and reports of agui-meta.

Every exception the package raises on purpose derives from :class:`AguiMetaError`::

    AguiMetaError
    ├── DataError (ValueError)            bad input; says where: index, offset, line, JSON path
    │   ├── DecodeError                   a frame or object that is not a valid AG-UI 1.0 event
    │   │   ├── FramingError              SSE / JSON-lines framing: truncated, oversized, not UTF-8
    │   │   └── MetadataError             `metadata` that is null or not an object
    │   ├── ChunkError                    a *_CHUNK event that cannot be expanded
    │   ├── VerifyError                   an event out of order (the reference's verifyEvents)
    │   ├── ApplyError                    an event the accumulator cannot apply (a raw chunk)
    │   └── StrictError                   a report that strict mode turned into an error
    ├── UsageError (RuntimeError)         the library used the wrong way (a bad argument too)
    │   ├── PipelineConsumed              a pipeline iterated a second time
    │   └── PipelineClosed                a pipeline used after it was closed
    ├── StreamLost                        a resumed stream whose rest cannot be delivered
    ├── ReplayFull                        a replay store with no room for another stream
    ├── RunFailed                         HttpAgent: the run ended with RUN_ERROR (or was aborted)
    ├── ToolRoundsExceeded                HttpAgent: client tools still called after max_tool_rounds
    ├── ResponseError                     HttpAgent: a response that is not a readable AG-UI stream
    │   ├── HttpStatusError               an error status
    │   └── IncompleteStream              the stream ended before RUN_FINISHED or RUN_ERROR
    ├── VersionConflict                   a thread's save lost its compare-and-set (threads)
    ├── ThreadStoreError                  a thread store that cannot load, save or be opened
    ├── SequenceGap                       a source's envelope numbers skip one (redis ingest)
    │   └── SourceConflict                a source's number taken again by another envelope
    ├── CommitTooLarge                    a worker's commit the Redis server refuses for its size
    ├── PriceTableError (ValueError)      a price table that cannot be read (names file and entry)
    ├── AgentError                        a gateway's agent: an error status, or it cannot be called
    ├── ThreadBusy                        a gateway's thread with an active run refuses another
    └── AtCapacity                        a gateway's ``max_runs`` (a front's ``max_dispatched``) full

Each is exported by the public module of what raises it: the pipeline's, the client's, the
replay stores' and :class:`PriceTableError` by ``agui_meta``; :class:`VersionConflict` and
:class:`ThreadStoreError` by ``agui_meta.threads``; :class:`SequenceGap`,
:class:`SourceConflict` and :class:`CommitTooLarge` by ``agui_meta.redis``;
:class:`AgentError`, :class:`ThreadBusy` and :class:`AtCapacity` by ``agui_meta.gateway`` (a
run registry raises the last two). Connection errors and timeouts of an HTTP client are
httpx's own.

Problems that the reference client only warns about are not exceptions: they are
:class:`Report` values, delivered to the ``on_report`` callback of the pipeline (or, when none
is given, issued as an :class:`AguiWarning`). Strict mode turns each into a :class:`StrictError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ._events import RunErrorEvent
from ._tokens import Usage

__all__ = [
    "AgentError",
    "AguiMetaError",
    "AguiWarning",
    "ApplyError",
    "AtCapacity",
    "ChunkError",
    "CommitTooLarge",
    "DataError",
    "DecodeError",
    "FramingError",
    "HttpStatusError",
    "IncompleteStream",
    "MetadataError",
    "PipelineClosed",
    "PipelineConsumed",
    "ReplayFull",
    "Report",
    "ResponseError",
    "RunFailed",
    "SequenceGap",
    "SourceConflict",
    "StreamLost",
    "StrictError",
    "ThreadBusy",
    "ThreadStoreError",
    "ToolRoundsExceeded",
    "UsageError",
    "VerifyError",
    "VersionConflict",
]


def _where(
    index: int | None, line: int | None, offset: int | None, path: str | None, text: str
) -> str:
    """`` (event 3, line 4, byte 120, at `$.x`)``: the known parts of a location, or ``""``."""
    parts = []
    if index is not None:
        parts.append(f"event {index}")
    if line is not None:
        parts.append(f"line {line}")
    if offset is not None:
        parts.append(f"byte {offset}")
    if path is not None and f"`{path}`" not in text:  # a message that names its path already
        parts.append(f"at `{path}`")
    return f" ({', '.join(parts)})" if parts else ""


class AguiMetaError(Exception):
    """Base class of every error agui-meta raises on purpose."""


class DataError(AguiMetaError, ValueError):
    """The input is wrong. The message names what and where.

    Attributes (each ``None`` when it does not apply):

    - ``index``: the 0-based index of the event in the stream;
    - ``offset``: the byte offset of the frame in the byte stream;
    - ``line``: the 1-based line number of the frame (JSON lines, SSE);
    - ``path``: the JSON path inside the event, such as ``$.messages[2].metadata``.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        offset: int | None = None,
        line: int | None = None,
        path: str | None = None,
    ) -> None:
        self.reason = message
        self.index = index
        self.offset = offset
        self.line = line
        self.path = path
        super().__init__(message)

    def locate(
        self, *, index: int | None = None, offset: int | None = None, line: int | None = None
    ) -> DataError:
        """Fill in location fields not known yet where the error was raised; returns ``self``."""
        if self.index is None and index is not None:
            self.index = index
        if self.offset is None and offset is not None:
            self.offset = offset
        if self.line is None and line is not None:
            self.line = line
        return self

    @property
    def code(self) -> str:
        """A stable identifier of the problem, as a :class:`Report` would carry it."""
        return type(self).__name__

    def to_report(self) -> Report:
        """This error as a report of severity ``"error"`` (what keep-going mode delivers)."""
        return Report(
            code=self.code,
            message=self.reason,
            severity="error",
            index=self.index,
            offset=self.offset,
            line=self.line,
            path=self.path,
        )

    def __str__(self) -> str:
        return self.reason + _where(self.index, self.line, self.offset, self.path, self.reason)


class DecodeError(DataError):
    """A frame or object that is not a valid AG-UI 1.0 event."""


class FramingError(DecodeError):
    """An SSE or JSON-lines byte stream that cannot be split into frames."""


class MetadataError(DecodeError):
    """A ``metadata`` value that is ``null`` or not a JSON object (the specification forbids it)."""


class ChunkError(DataError):
    """A ``*_CHUNK`` event that cannot be expanded, under the reference's conditions."""


class VerifyError(DataError):
    """An event that breaks the protocol's ordering rules, as the reference's verifier checks.

    ``rule`` names the rule broken (for example ``"run.first-event"``).
    """

    def __init__(self, message: str, *, rule: str = "order", **where: Any) -> None:
        self.rule = rule
        super().__init__(message, **where)

    @property
    def code(self) -> str:
        return self.rule


class ApplyError(DataError):
    """An event that the accumulator cannot apply (a ``*_CHUNK`` that was never expanded)."""


class StrictError(DataError):
    """A :class:`Report` raised as an error because the pipeline runs in strict mode."""

    @property
    def code(self) -> str:
        return self.report.code

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__(
            report.message,
            index=report.index,
            offset=report.offset,
            line=report.line,
            path=report.path,
        )


class UsageError(AguiMetaError, RuntimeError):
    """agui-meta was used in a way it does not support."""


class PipelineConsumed(UsageError):
    """A pipeline is single-use: it was iterated a second time."""

    def __init__(self) -> None:
        super().__init__(
            "This pipeline has already been iterated. A pipeline is single-use: call "
            "agui_meta.wrap() again with a fresh source to process another stream."
        )


class PipelineClosed(UsageError):
    """A pipeline was used after it had been closed."""

    def __init__(self) -> None:
        super().__init__(
            "This pipeline is closed. Iterate it inside its `async with` block, "
            "before the block exits."
        )


class StreamLost(AguiMetaError):
    """A resumed stream's rest cannot be delivered (agui-meta's replay extension).

    Raised by a replay reader (:class:`~agui_meta.ReplayBuffer`'s, ``RedisReplay``'s) when the
    stream was abandoned (no client for its ``linger``), its producer stopped without ending
    it (a replica that died), or the reader fell further behind than the events kept;
    :class:`~agui_meta.EventStreamResponse` sends it to the client as a ``RUN_ERROR`` with the
    code ``"stream_lost"``.
    """


class RunFailed(AguiMetaError):
    """The run ended with ``RUN_ERROR`` (or was aborted: ``code == "abort"``).

    ``message`` and ``code`` (``None`` when absent) are the event's; ``usage`` its token usage
    (empty when absent); ``event`` the event itself (``None`` for an abort).
    """

    def __init__(
        self,
        message: str,
        code: str | None = None,
        usage: Sequence[Usage] = (),
        event: RunErrorEvent | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.usage = list(usage)
        self.event = event
        where = f" [{code}]" if code is not None else ""
        super().__init__(f"the run failed{where}: {message}")


class ToolRoundsExceeded(AguiMetaError):
    """A run still left client tool calls pending after ``max_tool_rounds`` runs.

    ``rounds`` is the number of runs made; ``result`` the last run's
    :class:`~agui_meta.RunResult` (its ``pending_tool_call_ids`` are the calls left unanswered:
    the thread is as that run left it, and ``await agent.call_tools()`` answers them).
    """

    def __init__(self, rounds: int, result: Any) -> None:
        self.rounds = rounds
        self.result = result
        pending = ", ".join(repr(i) for i in result.pending_tool_call_ids)
        super().__init__(
            f"the agent still called client tools after {rounds} run(s) "
            f"(HttpAgent(max_tool_rounds={rounds})); unanswered tool calls: {pending}"
        )


class ResponseError(AguiMetaError):
    """The agent's HTTP response cannot be read as an AG-UI stream (base of the two below).

    Raised as itself for a media type agui-meta does not read (the protobuf one).
    """


class HttpStatusError(ResponseError):
    """The endpoint answered with a status other than 2xx: an error, or a redirect that its
    httpx client was not told to follow (``follow_redirects=True``; a redirect's body is not
    the run).

    ``status`` is the HTTP status, ``body`` the first bytes of the body (at most 512),
    ``url`` the URL requested, ``location`` a redirect's ``Location`` header (when known).
    """

    def __init__(self, status: int, body: bytes, url: str, location: str | None = None) -> None:
        self.status = status
        self.body = body
        self.url = url
        self.location = location
        text = body.decode("utf-8", "replace").strip()
        super().__init__(f"HTTP {status} from {url}" + (f": {text}" if text else ""))


class IncompleteStream(ResponseError):
    """The stream ended, or its connection dropped, before ``RUN_FINISHED`` or ``RUN_ERROR``.

    ``events`` is the number of events received.
    """

    def __init__(self, message: str, events: int) -> None:
        self.events = events
        super().__init__(message)


class VersionConflict(AguiMetaError):
    """A save lost a compare-and-set: the stored version is not the one the writer read.

    ``thread_id``, ``expected`` (the version the writer built on) and ``actual`` (the stored
    version, ``0`` for a thread never saved) say which.
    """

    def __init__(self, thread_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"thread {thread_id!r}: version conflict: the save builds on version {expected}, "
            f"the stored version is {actual}"
        )
        self.thread_id = thread_id
        self.expected = expected
        self.actual = actual


class SequenceGap(AguiMetaError):
    """An envelope's ``seq`` skips numbers its source never sent (an earlier one was lost)."""


class CommitTooLarge(AguiMetaError):
    """A commit the Redis server refuses for its size: it answered that an argument is longer
    than its ``proto-max-bulk-len``, or closed the connection twice in a row on a large commit
    while it still answers (``client-query-buffer-limit``). Raised by ``Worker.run``."""


class SourceConflict(SequenceGap):
    """A source sends, at a sequence number it already took, an envelope that differs from the
    one taken there: a different stream under a reused source name (or one cut differently).

    ``source``, ``seq`` and ``thread`` name the first such envelope. Nothing of the script call
    that met it was written (envelopes of earlier calls were).
    """

    def __init__(self, message: str, *, source: str, seq: int, thread: str) -> None:
        super().__init__(message)
        self.source = source
        self.seq = seq
        self.thread = thread


class AgentError(AguiMetaError):
    """An agent a gateway fronts answered with an error status, or could not be called."""


class ThreadBusy(AguiMetaError):
    """The thread has an active run (``run_id``, of the agent ``agent_name``): a gateway's run
    registry refuses to start another (the route answers ``409 Conflict``)."""

    def __init__(self, thread_id: str, run_id: str, agent_name: str) -> None:
        super().__init__(
            f"thread {thread_id!r} has an active run, {run_id!r}: stop it "
            f"(POST /agents/{agent_name}/stop) or wait for it to end"
        )
        self.thread_id = thread_id
        self.run_id = run_id
        self.agent_name = agent_name


class AtCapacity(AguiMetaError):
    """``max_runs`` runs are active: a gateway's run registry refuses to start another.

    ``max_runs`` is the limit reached; ``message`` says which, when it is not the registry's
    ``max_runs`` (a front replica's ``max_dispatched``, for one).
    """

    def __init__(self, max_runs: int, message: str | None = None) -> None:
        super().__init__(
            message or f"the gateway runs {max_runs} runs already (max_runs): retry later"
        )
        self.max_runs = max_runs


class AguiWarning(UserWarning):
    """The warning category of reports issued when no ``on_report`` callback is given."""


Severity = Literal["warning", "error", "info"]


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """One problem found in a stream and handled without stopping it.

    ``code`` is a stable identifier (for example ``"unknown-field"``, ``"unknown-event-type"``,
    ``"patch-failed"``, ``"unprefixed-metadata-key"``); ``message`` is the sentence for people.
    ``severity`` is ``"warning"`` for what the reference client warns about, ``"error"`` for a
    problem skipped in keep-going mode, ``"info"`` for lint findings.
    """

    code: str
    message: str
    severity: Severity = "warning"
    index: int | None = None
    offset: int | None = None
    line: int | None = None
    path: str | None = None
    event_type: str | None = None

    def __str__(self) -> str:
        where = _where(self.index, self.line, self.offset, self.path, self.message)
        return f"[{self.code}] {self.message}{where}"


class ReplayFull(AguiMetaError):
    """A replay store has no room for another stream (:class:`~agui_meta.ReplayBuffer`'s
    ``max_streams`` streams are all running).

    ``retry_after`` is the number of seconds after which room may have been made (the store's
    ``linger``, rounded up, at least 1): :class:`~agui_meta.EventStreamResponse` answers the
    request ``503 Service Unavailable`` with that ``Retry-After`` and runs nothing.
    """

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ThreadStoreError(AguiMetaError):
    """A thread store could not load or save a thread, or cannot be opened.

    The message names the store (its kind and where: a file, a Redis key) and the thread;
    ``store`` and ``thread_id`` (``None`` for an error of the store itself, such as a file
    that cannot be opened) say the same; the error underneath is the ``__cause__``.
    """

    def __init__(self, message: str, *, store: str, thread_id: str | None = None) -> None:
        self.store = store
        self.thread_id = thread_id
        where = f"thread {thread_id!r} in the {store}" if thread_id is not None else store
        super().__init__(f"{where}: {message}")


class PriceTableError(AguiMetaError, ValueError):
    """A price table cannot be read: the message names the file (or ``<table>``) and the
    entry or field that is wrong."""
