"""HttpAgent: a Python AG-UI client that holds a thread, as the official ``HttpAgent`` does.

One agent is one thread: its :class:`~agui_meta.Store` keeps the messages and the state from
run to run, and each run's input is built from them. A run POSTs the ``RunAgentInput`` as JSON
(``Accept: text/event-stream``), decodes the streamed body (SSE or JSON lines, by content type)
frame by frame and puts it through the default stages (expand chunks, verify, accumulate into
the agent's store, the agent's ledger), after the user's own stages. What the official client
does before a run is done too: activity messages are not sent, a run with pending interrupts
needs a ``resume`` that answers each of them (an expired one only by cancelling it), and the
input is validated (unknown members stripped with a report, malformed ones an error) before
anything is sent.

Errors a user can act on (all in :mod:`agui_meta._exceptions`' tree): :class:`~agui_meta.RunFailed`
(the run sent ``RUN_ERROR``: code, message, usage), :class:`~agui_meta.IncompleteStream` (the
body ended, or the connection dropped, before ``RUN_FINISHED``/``RUN_ERROR``),
:class:`~agui_meta.HttpStatusError` (status and the body's first bytes),
:class:`~agui_meta.ResponseError` (their base; itself: a media type that cannot be read, such
as the protobuf one).
Connection errors and timeouts are httpx's own exceptions, raised as they are.

Client-side tools: ``HttpAgent(tools=[function, ...])`` declares Python functions as the run's
frontend tools (their schemas derived in :mod:`._tools`); :meth:`HttpAgent.call_tools` answers
the calls a run left to them, and :meth:`HttpAgent.run_agent` loops — run, answer, run again —
while the agent calls them, at most ``max_tool_rounds`` runs.

Reconnecting (agui-meta's extension, off by default): with ``reconnect=n``, a stream that
drops before its terminal event after sending SSE ``id:`` fields is requested again, after the
server's ``retry`` delay, with the same body and a ``Last-Event-ID`` header; a server that
supports it (:class:`~agui_meta.EventStreamResponse` with a replay buffer) answers with the
events after that id and the header ``agui-meta-resumed``. The partial frame of the dropped
connection is discarded, so the run assembles exactly as an unbroken one; a stream whose last
events came without an id of their own is not resumed (the server would send them again, and
they would be applied twice). Waits back off: the ``n``-th reconnection of a run waits the
server's ``retry`` (or ``reconnect_delay``) times ``2**(n-1)``, at least 0.1 s from the
second on, at most ``max_reconnect_delay`` (a ``retry`` of any size); all the reconnections
of a run, waits and connecting included, take at most ``reconnect_timeout`` seconds.

Durable threads: with ``thread_store=`` (any :class:`~agui_meta.threads.ThreadStore`), the agent
continues the stored thread ``thread_id``. Its first run (or :meth:`HttpAgent.load`) loads the
thread's snapshot into the agent's store; after each run that received events it saves the
thread with compare-and-set on the version it loaded or last saved, so that a thread written
by another agent meanwhile raises :class:`~agui_meta.threads.VersionConflict` instead of being
overwritten. The save is shielded: a cancellation arriving during it waits for it to end (at
most ``save_timeout`` seconds) and is raised afterwards, so the agent always knows whether its
thread was saved.
"""

from __future__ import annotations

import contextlib
import math
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
import msgspec
from msgspec import UNSET

from ._accumulate import Update
from ._decode import EventDecoder
from ._defaults import DefaultStages
from ._events import (
    Interrupt,
    Message,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ._exceptions import (
    DataError,
    HttpStatusError,
    IncompleteStream,
    Report,
    ResponseError,
    RunFailed,
    ToolRoundsExceeded,
    UsageError,
    VersionConflict,
)
from ._framing import (
    ACCEPT,
    ACCEPT_ENCODING,
    DEFAULT_MAX_FRAME_SIZE,
    PROTOBUF_MEDIA_TYPE,
    Frame,
    Framer,
    SSEDecoder,
    aiter_body,
    media_format,
    media_type,
)
from ._interrupts import check_resume
from ._ledger import Ledger, RunOutcome, RunRecord, RunSuccess
from ._metadata import enc_hook
from ._middleware import middleware
from ._pipeline import Pipeline, Stage, uninterrupted, wrap
from ._schema import CAPABILITIES_NODE, Findings, render, walk_obj
from ._stage import Mode, ReportHandler, Transducer
from ._store import MessageItem, Store
from ._threads import ThreadSnapshot, ThreadStore
from ._tokens import Usage
from ._tools import (
    DEFAULT_TOOL_TIMEOUT,
    ClientTool,
    call_tools,
    client_tools,
    tool_name,
)
from ._tracecontext import TRACEPARENT_KEY, current_carrier, current_context, trace_id
from ._warn import ReportWarnings

if TYPE_CHECKING:
    import httpx

    from ._events import AgentCapabilities

__all__ = [
    "PROTOBUF_MEDIA_TYPE",
    "RESUMED_HEADER",
    "AgentRun",
    "HttpAgent",
    "RunResult",
]

#: The response header by which a server says it resumed a stream after ``Last-Event-ID``.
RESUMED_HEADER = "agui-meta-resumed"
_BODY_PREVIEW = 512
#: The least wait before a second or later reconnection of a run (``retry: 0`` included).
MIN_BACKOFF = 0.1


class RunResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What one run produced (see :meth:`HttpAgent.run_agent`).

    - ``thread_id``, ``run_id``: the ids of the run's input;
    - ``new_messages``: the messages (wire JSON) whose ids the thread did not hold before the
      run, in order (the official ``newMessages``);
    - ``result``: ``RUN_FINISHED.result`` of a successful run (``None`` otherwise, as the
      official client gives it only for a success outcome);
    - ``outcome``: the ledger's outcome (:class:`~agui_meta.RunSuccess`,
      :class:`~agui_meta.RunInterrupted` or :class:`~agui_meta.RunCancelled`);
    - ``usage``: the token usage entries of RUN_FINISHED, as sent (:class:`~agui_meta.Usage`);
    - ``pending_interrupts``: the interrupts the run left open (answer them with ``resume=``);
    - ``pending_tool_call_ids``: the tool calls left for the client (frontend tools);
    - ``record``: the ledger's record of the run; ``reports``: what the run reported;
    - ``trace_id``: the W3C trace id of the run (32 hex digits) — the client's, when an
      OpenTelemetry span was current as the run started (its ``traceparent`` went with each
      request), else the one the server stamped in RUN_STARTED's metadata
      (``w3c.traceparent``) — to attach feedback to; ``None`` when neither.

    :meth:`to_json` gives it as JSON ``bytes``, :meth:`to_builtins` as a ``dict`` for
    ``json.dumps``.
    """

    thread_id: str
    run_id: str
    new_messages: list[dict[str, Any]]
    result: Any
    outcome: RunOutcome | None
    usage: list[Usage]
    pending_interrupts: list[Interrupt]
    pending_tool_call_ids: list[str]
    record: RunRecord | None
    reports: list[Report]
    trace_id: str | None = None

    def to_json(self) -> bytes:
        """The result as JSON, in ``bytes`` (UTF-8): camelCase names, the messages, outcome,
        usage and record as their own ``to_json`` writes them."""
        return _encode_json(self)

    def to_builtins(self) -> dict[str, Any]:
        """The result as a ``dict`` of JSON types (``json.dumps`` takes it), shaped like
        :meth:`to_json`."""
        result: dict[str, Any] = msgspec.to_builtins(self, enc_hook=enc_hook)
        return result


_encode_json = msgspec.json.Encoder(enc_hook=enc_hook).encode


class _Watch(Transducer[Update, Update]):
    """The last stage of a run: notes the run's terminal event; at the end, raises if needed."""

    def __init__(self) -> None:
        self.events = 0  # frames received (the source counts them)
        self.updates = 0  # updates that reached the end of the chain
        self.started = False
        self.terminal: RunFinishedEvent | RunErrorEvent | None = None

    def feed(self, item: Update) -> None:
        self.updates += 1
        event = item.event
        kind = type(event)
        if kind is RunStartedEvent:
            self.started = True
            self.terminal = None
        elif kind is RunFinishedEvent or kind is RunErrorEvent:
            self.terminal = event  # type: ignore[assignment]
        self.emit(item)

    def close(self) -> None:
        terminal = self.terminal
        if isinstance(terminal, RunErrorEvent):
            raise RunFailed(
                terminal.message,
                None if terminal.code is UNSET else terminal.code,
                [] if terminal.usage is UNSET else [*map(Usage.from_wire, terminal.usage)],
                terminal,
            )
        if terminal is None:
            raise IncompleteStream(
                f"the stream ended without RUN_FINISHED or RUN_ERROR after {self.events} "
                f"event{'s' if self.events != 1 else ''}"
                + ("" if self.started else " (no RUN_STARTED either)"),
                self.events,
            )


def closing_bytes(response: httpx.Response) -> contextlib.aclosing[AsyncGenerator[bytes, None]]:
    """The body's chunks, content encoding undone in bounded steps (see ``aiter_body``),
    closed when the block exits."""
    return contextlib.aclosing(aiter_body(response))


async def _small_body(response: httpx.Response, url: str, limit: int, what: str) -> bytes:
    """The whole body of a short JSON answer, read in bounds: at most ``limit`` bytes, and
    the first bytes only of an error (any status but 2xx: a redirect too, as for a run).

    :raises HttpStatusError: the status is not 2xx.
    :raises DataError: the body is longer than ``limit``.
    """
    failed = not response.is_success
    body = b""
    async with closing_bytes(response) as chunks:
        async for chunk in chunks:
            body += chunk
            if failed and len(body) >= _BODY_PREVIEW:
                break
            if len(body) > limit:
                raise DataError(
                    f"{what} from {url} is larger than {limit:,} bytes "
                    "(HttpAgent(max_frame_size=...))"
                )
    if failed:
        raise HttpStatusError(response.status_code, body[:_BODY_PREVIEW], url)
    return body


def _require_httpx() -> Any:
    try:
        import httpx
    except ImportError:  # pragma: no cover - the test extra installs it
        raise ImportError(
            "agui_meta.HttpAgent needs httpx: pip install 'agui-meta[httpx]'"
        ) from None
    return httpx


def _as_wire(value: Any) -> Any:
    """Structs to wire JSON builtins; everything else as it is."""
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return value


class AgentRun:
    """One run in progress: iterate it for its :class:`~agui_meta.Update` values.

    Created by :meth:`HttpAgent.run`. ``async for update in run`` gives one update per event;
    ``run.batches()`` gives lists of them. When the stream has ended, ``run.result`` is the
    :class:`RunResult`; ``run.reports`` lists what was reported so far.
    """

    def __init__(
        self,
        agent: HttpAgent,
        pipeline: Pipeline[Update],
        input: dict[str, Any],
        watch: _Watch,
    ) -> None:
        self._agent = agent
        self._watch = watch
        self._pipeline = pipeline
        self._input = input
        self._known = {item.id for item in agent.store.messages()}
        self._result: RunResult | None = None

    @property
    def input(self) -> dict[str, Any]:
        """The ``RunAgentInput`` sent, as wire JSON."""
        return self._input

    @property
    def reports(self) -> list[Report]:
        return self._pipeline.reports

    def __aiter__(self) -> AsyncIterator[Update]:
        return self._pipeline.__aiter__()

    def batches(self) -> AsyncIterator[list[Update]]:
        return self._pipeline.batches()

    @property
    def result(self) -> RunResult:
        """The run's result, once its stream has ended with RUN_FINISHED."""
        if self._result is None:
            watch = self._watch
            if not isinstance(watch.terminal, RunFinishedEvent):
                raise UsageError("the run has no result yet: iterate it to its end first")
            self._result = self._agent._result_of(self, watch.terminal)
        return self._result


class HttpAgent:
    """A thread with an AG-UI agent over HTTP, run by run (the official ``HttpAgent``).

    :param url: the agent's endpoint (POST).
    :param headers: headers sent with every run (``Content-Type`` and ``Accept`` are set).
    :param http_client: an ``httpx.AsyncClient`` to use (its timeouts apply); by default a
        client is made for each run with ``timeout``.
    :param timeout: the httpx timeout of the default client (seconds, or an ``httpx.Timeout``):
        10 s to connect, write and get a pool connection, 300 s between two reads.
    :param thread_id: the thread's id (a new UUID by default).
    :param messages: the thread's history: wire JSON dicts or :class:`~agui_meta.events.Message`
        Structs, as the store takes them (this is how a stored thread is continued).
    :param state: the thread's state (``{}`` by default).
    :param stages: stages put before the default ones in every run (they see and may change
        the decoded events); transducers are reconnected for each run.
    :param middleware: AG-UI-style middleware (``async def mw(input, next)`` or
        :class:`~agui_meta.Middleware` objects), first listed outermost, run before ``stages``
        and given each run's :class:`~agui_meta.events.RunAgentInput`.
    :param accept: ``"sse"`` (default) or ``"jsonl"``: the format asked for.
    :param reconnect: how many times a run may resume a dropped SSE stream with
        ``Last-Event-ID`` (agui-meta's extension; 0, the default, never reconnects).
    :param reconnect_delay: seconds to wait before reconnecting when the server sent no
        ``retry`` field.
    :param max_reconnect_delay: the longest wait before one reconnection (seconds): the
        server's ``retry``, and the back-off doubling it at each reconnection, are capped here.
    :param reconnect_timeout: the longest a run may spend reconnecting, in seconds, summed
        over its drops (waits and connecting until the resumed response's headers); past it,
        or when the next wait would go past it, the run raises :class:`IncompleteStream`.
    :param mode: ``"default"``, ``"strict"`` or ``"keep_going"`` (see :func:`~agui_meta.wrap`).
    :param on_report: receives every :class:`~agui_meta.Report` (by default, warnings).
    :param thread_store: a :class:`~agui_meta.threads.ThreadStore` (``MemoryThreadStore``,
        ``SQLiteThreadStore``, ``agui_meta.redis.RedisThreadStore``…) holding the thread
        ``thread_id``: the first run loads it (see :meth:`load`) and every run that received
        events saves it (see :meth:`save`). ``None`` (the default): nothing is loaded or saved.
    :param send_messages: ``"all"`` (the default, as the official client does) or ``"new"``:
        after a run or a :meth:`connect` to an agui-meta gateway, which holds the thread, the
        next run sends only the messages added since (the gateway gives the agent the whole
        thread).
    :param save_timeout: the longest a save may take, in seconds (a save is shielded from
        cancellation, so it needs a bound of its own); past it the save raises ``TimeoutError``
        and its outcome is unknown.
    :param tools: tools declared in every run: Python functions (sync or async) and
        :class:`~agui_meta.ClientTool` objects, which the client executes when the agent calls
        them (see :meth:`run_agent` and :meth:`call_tools`), and wire declarations (dicts or
        :class:`~agui_meta.events.Tool`), only declared. A run's own ``tools=`` follow them.
    :param max_tool_rounds: the most runs :meth:`run_agent` makes while the agent calls client
        tools (past it, :class:`~agui_meta.ToolRoundsExceeded`).
    :param tool_timeout: the longest one client tool call may take, in seconds (a
        :class:`~agui_meta.ClientTool` may set its own); past it the call is answered with an
        error result.
    :param tool_concurrency: how many client tool calls of a run execute at once.
    :param max_tool_calls: how many client tool calls of a run are executed at most; the calls
        past them are answered with an error result, unrun.
    :param capabilities_url: where :meth:`capabilities` asks (``GET``); by default the
        endpoint's URL followed by ``/capabilities``.

    >>> from agui_meta import HttpAgent
    >>> agent = HttpAgent("http://127.0.0.1:8000/agent", thread_id="t-1",
    ...                   messages=[{"id": "u1", "role": "user", "content": "Hi"}])
    >>> agent.messages_wire(), agent.state
    ([{'id': 'u1', 'role': 'user', 'content': 'Hi'}], {})
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        thread_id: str | None = None,
        messages: Iterable[Mapping[str, Any] | Message] = (),
        state: Any = None,
        stages: Sequence[Stage] = (),
        middleware: Sequence[Any] = (),
        accept: Literal["sse", "jsonl"] = "sse",
        reconnect: int = 0,
        reconnect_delay: float = 1.0,
        max_reconnect_delay: float = 30.0,
        reconnect_timeout: float = 120.0,
        mode: Mode = "default",
        on_report: ReportHandler | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        thread_store: ThreadStore | None = None,
        save_timeout: float = 30.0,
        tools: Iterable[Any] = (),
        max_tool_rounds: int = 10,
        tool_timeout: float = DEFAULT_TOOL_TIMEOUT,
        tool_concurrency: int = 8,
        max_tool_calls: int = 32,
        capabilities_url: str | None = None,
        send_messages: Literal["all", "new"] = "all",
    ) -> None:
        if accept not in ACCEPT:
            raise UsageError(f"accept must be 'sse' or 'jsonl', got {accept!r}")
        if reconnect < 0:
            raise UsageError(f"reconnect must be >= 0, got {reconnect}")
        if not (reconnect_delay >= 0 and max_reconnect_delay >= 0 and reconnect_timeout > 0):
            raise UsageError(
                "reconnect_delay and max_reconnect_delay must be >= 0 and reconnect_timeout "
                f"> 0 seconds; got {reconnect_delay!r}, {max_reconnect_delay!r}, "
                f"{reconnect_timeout!r}"
            )
        self.url = url
        self.headers = dict(headers or {})
        self._trace: dict[str, str] = {}  # the run's traceparent and tracestate headers
        self.http_client = http_client
        self.timeout = timeout
        self.thread_id = thread_id if thread_id is not None else str(uuid.uuid4())
        self.store = Store(messages, {} if state is None else state)
        self.ledger: Ledger[Any] = Ledger()
        self.stages = tuple(stages)
        self.middleware = tuple(middleware)
        self.accept = accept
        self.reconnect = reconnect
        self.reconnect_delay = reconnect_delay
        self.max_reconnect_delay = max_reconnect_delay
        self.reconnect_timeout = reconnect_timeout
        self.mode: Mode = mode
        self.on_report = on_report
        self.max_frame_size = max_frame_size
        self.thread_store = thread_store
        if not save_timeout > 0:
            raise UsageError(f"save_timeout must be > 0 seconds, got {save_timeout!r}")
        self.save_timeout = save_timeout
        self._scope: anyio.CancelScope | None = None
        self._aborted = False
        self._busy = False  # a run (its save included), a load or a save is in progress
        self._snapshot: ThreadSnapshot | None = None  # as last loaded or saved
        self._saved_runs = 0  # the ledger's records the last save counted
        self._state_assigned = False  # agent.state was assigned before the first load
        self._save_error: BaseException | None = None  # the last save failed
        if min(max_tool_rounds, tool_concurrency, max_tool_calls) < 1:
            raise UsageError(
                "max_tool_rounds, tool_concurrency and max_tool_calls must be >= 1, got "
                f"{max_tool_rounds!r}, {tool_concurrency!r} and {max_tool_calls!r}"
            )
        if not tool_timeout > 0:
            raise UsageError(f"tool_timeout must be > 0 seconds, got {tool_timeout!r}")
        self._tools_given = tuple(tools)
        self._client_tools, self._tool_declarations = client_tools(self._tools_given)
        self._tool_names = {tool_name(d) for d in self._tool_declarations}
        self.max_tool_rounds = max_tool_rounds
        self.tool_timeout = tool_timeout
        self.tool_concurrency = tool_concurrency
        self.max_tool_calls = max_tool_calls
        self.capabilities_url = capabilities_url
        if send_messages not in ("all", "new"):
            raise UsageError(f"send_messages must be 'all' or 'new', got {send_messages!r}")
        self.send_messages = send_messages
        self._server_ids: set[Any] | None = None  # messages a gateway holds (send "new")

    # -- the thread --------------------------------------------------------------------------

    def messages_wire(self) -> list[dict[str, Any]]:
        """The thread's messages in AG-UI wire JSON (activity included)."""
        return self.store.messages_wire()

    @property
    def state(self) -> Any:
        """The thread's state (the live value; assigning replaces it with a copy)."""
        return self.store.state

    @state.setter
    def state(self, value: Any) -> None:
        self.store.state = msgspec.json.decode(msgspec.json.encode(value))
        self._state_assigned = True

    @property
    def snapshot(self) -> ThreadSnapshot | None:
        """The thread's :class:`~agui_meta.threads.ThreadSnapshot` as last loaded from or saved
        to ``thread_store`` (its ``version``, its ledger summary of every run the thread has had);
        ``None`` before the first load, and always without a thread store."""
        return self._snapshot

    @property
    def pending_interrupts(self) -> list[Interrupt]:
        """The interrupts the last run left open: the next run's ``resume`` must answer them."""
        return list(self.store.pending_interrupts)

    def add_message(self, message: Mapping[str, Any] | Message) -> None:
        """Append a message (wire JSON or a :class:`~agui_meta.events.Message`) to the thread.

        :raises ~agui_meta.DecodeError: the message is not a valid AG-UI message.
        """
        from ._decode import decode_message

        if not isinstance(message, msgspec.Struct):
            message = decode_message(dict(message))
        self.store.append(MessageItem.from_message(message))

    def add_messages(self, messages: Iterable[Mapping[str, Any] | Message]) -> None:
        """Append messages to the thread, in order (the official ``addMessages``).

        Every message is checked before any is appended: a bad one leaves the thread as it was.

        :raises ~agui_meta.DecodeError: a message is not a valid AG-UI message.
        """
        for item in self._items(messages):
            self.store.append(item)

    def set_messages(self, messages: Iterable[Mapping[str, Any] | Message]) -> None:
        """Replace the thread's messages with copies of ``messages`` (the official
        ``setMessages``: the state and the pending interrupts stay as they are).

        :raises ~agui_meta.UsageError: a run is in progress.
        :raises ~agui_meta.DecodeError: a message is not a valid AG-UI message (the thread is
            left as it was).
        """
        if self._busy:
            raise UsageError("HttpAgent.set_messages(): a run, load or save is in progress")
        self.store.reset(self._items(messages))

    def _items(self, messages: Iterable[Mapping[str, Any] | Message]) -> list[MessageItem]:
        from ._decode import decode_message

        items = []
        for message in messages:
            if not isinstance(message, msgspec.Struct):
                message = decode_message(dict(message))
            items.append(MessageItem.from_message(message))
        return items

    def clone(self) -> HttpAgent:
        """A new agent on the same thread (the official ``clone()``): the same endpoint,
        headers, HTTP client, options, stages, middleware and tools, the same ``thread_id``
        and thread store, and copies of the messages, the state and the pending interrupts.
        The clone is not running and its ledger starts empty: runs on one do not change the
        other. With a thread store, both continue from the version last loaded or saved, so
        the second of them to save meets a :class:`~agui_meta.threads.VersionConflict`.
        """
        twin = HttpAgent(
            self.url,
            headers=self.headers,
            http_client=self.http_client,
            timeout=self.timeout,
            thread_id=self.thread_id,
            messages=self.store.messages_wire(),
            state=self.store.state,
            stages=self.stages,
            middleware=self.middleware,
            accept=self.accept,
            reconnect=self.reconnect,
            reconnect_delay=self.reconnect_delay,
            max_reconnect_delay=self.max_reconnect_delay,
            reconnect_timeout=self.reconnect_timeout,
            mode=self.mode,
            on_report=self.on_report,
            max_frame_size=self.max_frame_size,
            thread_store=self.thread_store,
            save_timeout=self.save_timeout,
            tools=self._tools_given,
            max_tool_rounds=self.max_tool_rounds,
            tool_timeout=self.tool_timeout,
            tool_concurrency=self.tool_concurrency,
            max_tool_calls=self.max_tool_calls,
            capabilities_url=self.capabilities_url,
            send_messages=self.send_messages,
        )
        if self._server_ids is not None:
            twin._server_ids = set(self._server_ids)
        twin.store.pending_interrupts = list(self.store.pending_interrupts)
        twin._snapshot = self._snapshot
        twin._state_assigned = self._state_assigned
        twin._save_error = self._save_error
        return twin

    # -- capabilities ------------------------------------------------------------------------

    async def capabilities(self) -> AgentCapabilities | None:
        """The agent's :class:`~agui_meta.events.AgentCapabilities`, when it offers them.

        AG-UI leaves discovery to each integration (the official ``HttpAgent`` does not
        implement ``getCapabilities()``); this asks as the official ADK integration's agent
        does: ``GET`` the endpoint's URL followed by ``/capabilities`` (or
        ``capabilities_url``), expecting the JSON object. ``None`` when the agent does not
        offer them (404, 405 or 501). Members this version does not know are stripped, each
        with an ``unknown-field`` :class:`~agui_meta.Report` (to ``on_report``).

        :raises HttpStatusError: another status but 2xx (a redirect is followed only when the
            ``http_client`` is told to).
        :raises ~agui_meta.DataError: the answer is not JSON, not an ``AgentCapabilities``
            object (the message gives the JSON path), or larger than ``max_frame_size``.
        """
        from ._events import AgentCapabilities

        http = _require_httpx()
        url = self.capabilities_url or self.url.rstrip("/") + "/capabilities"
        headers = {**self.headers, "Accept": "application/json"}
        limit = self.max_frame_size
        async with contextlib.AsyncExitStack() as stack:
            client: httpx.AsyncClient
            if self.http_client is not None:
                client = self.http_client
            else:
                timeout = self.timeout if self.timeout is not None else http.Timeout(10.0)
                client = await stack.enter_async_context(http.AsyncClient(timeout=timeout))
            response = await stack.enter_async_context(client.stream("GET", url, headers=headers))
            if response.status_code in (404, 405, 501):
                return None
            body = await _small_body(response, url, limit, "the capabilities")
        try:
            data = msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise DataError(f"the capabilities from {url} are not JSON: {exc}") from None
        # As the reference's loose schemas: unknown members are stripped, with a report each.
        findings = Findings()
        data = walk_obj(data, CAPABILITIES_NODE, None, findings)
        report = self.on_report or ReportWarnings()
        for code, where, message in findings.items:
            report(Report(code=code, message=f"capabilities: {message}", path=render(where)))
        try:
            return msgspec.convert(data, AgentCapabilities)
        except msgspec.ValidationError as exc:
            text = str(exc)
            path = text.rpartition(" - at `")[2].rstrip("`") if " - at `" in text else "$"
            raise DataError(
                f"the capabilities from {url} are not a valid AgentCapabilities object: {exc}",
                path=path,
            ) from None

    # -- client tools ------------------------------------------------------------------------

    def _run_tools(self, tools: Iterable[Any]) -> tuple[dict[str, ClientTool], list[Any]]:
        """The tools of a run: the agent's and the run's own (``tools=``), executed by name and
        declared in order."""
        if not tools:
            return self._client_tools, self._tool_declarations
        executed, declared = client_tools(tools)
        names = {tool_name(d) for d in declared}
        clash = sorted(str(n) for n in names & self._tool_names)
        if clash:
            raise UsageError(
                f"the run's tools= declares {', '.join(repr(n) for n in clash)}, which "
                "HttpAgent(tools=...) declares already"
            )
        return {**self._client_tools, **executed}, [*self._tool_declarations, *declared]

    def _unanswered_calls(
        self, tools: Mapping[str, ClientTool] | None = None
    ) -> tuple[list[Any], list[str]]:
        """The pending calls of the last run no tool message answers: those of client tools
        (``tools``, by default the agent's; as ToolCallItems) and the ids of the others."""
        if tools is None:
            tools = self._client_tools
        pending = self.store.pending_tool_call_ids
        if not pending:
            return [], []
        answered = {item.tool_call_id for item in self.store.messages() if item.role == "tool"}
        mine: list[Any] = []
        others: list[str] = []
        for call_id in pending:
            if call_id in answered:
                continue
            call = self.store.tool_call(call_id)
            if call is not None and call.name in tools:
                mine.append(call)
            else:
                others.append(call_id)
        return mine, others

    async def call_tools(self) -> list[dict[str, Any]]:
        """Execute the client tools the last run called and left unanswered, and append their
        results to the thread as ``tool`` messages (in the order of the calls).

        The calls run concurrently (at most ``tool_concurrency`` at once), each within its
        timeout. Arguments that are not JSON or do not match the tool's parameters, an
        exception and a timeout each become an error result (the message's ``content`` and
        ``error``) naming the tool and the problem, for the agent to read.
        Calls to tools the client does not execute are left alone. The results are appended
        only once every call has its answer: a cancellation (raised as it is) appends none,
        leaving the calls pending. Returns the messages appended, as wire JSON (empty when
        nothing was to be done).

        :raises ~agui_meta.UsageError: a run, load or save is in progress.
        """
        if self._busy:
            raise UsageError("HttpAgent.call_tools(): a run, load or save is in progress")
        return await self._call_tools(self._client_tools)

    async def _call_tools(self, tools: Mapping[str, ClientTool]) -> list[dict[str, Any]]:
        mine, _ = self._unanswered_calls(tools)
        if not mine:
            return []
        calls = [(c.id, c.name, c.arguments, str(uuid.uuid4())) for c in mine]
        self._busy = True
        try:
            results = await call_tools(
                tools,
                calls,
                timeout_s=self.tool_timeout,
                concurrency=self.tool_concurrency,
                max_calls=self.max_tool_calls,
            )
        finally:
            self._busy = False
        messages = [result.to_message() for result in results]
        self.add_messages(messages)
        return messages

    def abort_run(self) -> None:
        """Cancel the run in progress, if any: its response and pipeline are closed and the
        run raises :class:`RunFailed` with ``code == "abort"``."""
        if self._scope is not None:
            self._aborted = True
            self._scope.cancel()

    # -- the stored thread -------------------------------------------------------------------

    def _need_store(self, what: str) -> ThreadStore:
        if self.thread_store is None:
            raise UsageError(
                f"HttpAgent.{what}() needs a thread store: HttpAgent(thread_store=...)"
            )
        if self._busy:
            raise UsageError(f"HttpAgent.{what}(): a run, load or save is in progress")
        return self.thread_store

    async def load(self) -> ThreadSnapshot | None:
        """Load the thread ``thread_id`` from ``thread_store`` into the agent's store.

        The first run calls it when it has not been called. The first load keeps what the
        agent was given before it: when the store holds the thread, its messages, state and
        pending interrupts become the agent's, the agent's own messages (``messages=``,
        :meth:`add_message`) whose ids the stored thread does not hold follow them, and a state
        assigned to ``agent.state`` replaces the stored one (``state=`` only starts a thread the
        store does not hold). A later load — after a :class:`~agui_meta.threads.VersionConflict`
        — replaces the agent's thread with the stored one, dropping what was not saved.

        Returns the snapshot loaded (``None``: the store does not hold the thread, which starts
        from what the agent holds, at version 0).

        :raises ~agui_meta.UsageError: no thread store, a run in progress, or (first load) a
            message of the agent whose id the stored thread holds with other content.
        """
        threads = self._need_store("load")
        self._busy = True
        try:
            stored = await threads.load(self.thread_id)
        finally:
            self._busy = False
        if stored is not None and stored.thread_id != self.thread_id:
            raise UsageError(
                f"the thread store answered thread {stored.thread_id!r} for {self.thread_id!r}"
            )
        first = self._snapshot is None
        if stored is None:
            base = ThreadSnapshot(thread_id=self.thread_id)
            if not first:
                self.store = base.to_store()
        elif first:
            self.store = self._merged(stored).to_store()
        else:
            self.store = stored.to_store()
        self._snapshot = stored if stored is not None else base
        self._saved_runs = len(self.ledger.runs)
        self._save_error = None
        return stored

    def _merged(self, stored: ThreadSnapshot) -> ThreadSnapshot:
        """The stored thread with what the agent held before its first load on top."""
        held = {m["id"]: m for m in stored.messages if isinstance(m.get("id"), str)}
        extra = []
        for message in self.store.messages_wire():
            found = held.get(message["id"])
            if found is None:
                extra.append(message)
            elif found != message:
                raise UsageError(
                    f"thread {self.thread_id!r}: the agent's message {message['id']!r} differs "
                    f"from the one the thread store holds (version {stored.version}); load the "
                    "stored thread (HttpAgent without messages=) and add only new messages"
                )
        state = self.store.state if self._state_assigned else stored.state
        return msgspec.structs.replace(stored, messages=[*stored.messages, *extra], state=state)

    async def save(self) -> ThreadSnapshot:
        """Save the thread to ``thread_store`` now; every run that received events does it.

        The snapshot saved is the next version of the one last loaded or saved (the thread is
        loaded first if it was not), with the runs of the agent's ledger since then counted in
        its ledger summary; it is returned, and :attr:`snapshot` becomes it. The save is shielded
        from cancellation, at most ``save_timeout`` seconds: a cancellation arriving meanwhile is
        raised once the save has ended, and :attr:`snapshot` says whether it happened.

        :raises ~agui_meta.threads.VersionConflict: another writer saved the thread since it was
            loaded or last saved here (the exception names the thread and both versions).
            Nothing was saved; :meth:`load` takes the stored thread, and until then a run
            raises :class:`~agui_meta.UsageError`.
        :raises TimeoutError: the save took longer than ``save_timeout`` (it may or may not have
            happened: :meth:`load` tells).
        """
        self._need_store("save")
        if self._snapshot is None:
            await self.load()
        self._busy = True
        try:
            return await self._save()
        finally:
            self._busy = False

    async def _save(self) -> ThreadSnapshot:
        threads, base = self.thread_store, self._snapshot
        assert threads is not None and base is not None
        runs = self.ledger.runs
        count = len(runs)
        snapshot = base.advance(self.store, runs[self._saved_runs : count])
        failed: list[BaseException] = []

        async def attempt() -> None:
            # Runs to its end whatever cancellation arrives (see uninterrupted); what it
            # learns is recorded here, before any cancellation is raised to the caller.
            try:
                with anyio.fail_after(self.save_timeout):
                    await threads.save(snapshot)
            except Exception as exc:  # noqa: BLE001 - raised to the caller after the shield
                self._save_error = exc
                failed.append(exc)
            else:
                self._snapshot = snapshot
                self._saved_runs = count
                self._save_error = None

        await uninterrupted(attempt)
        await anyio.lowlevel.checkpoint_if_cancelled()
        if failed:
            raise failed[0]
        return snapshot

    def _check_saved(self) -> None:
        error = self._save_error
        if error is None:
            return
        if isinstance(error, VersionConflict):
            raise UsageError(
                f"{error}: another writer saved thread {self.thread_id!r}, so a run on this "
                "agent's copy would diverge; await agent.load() takes the stored thread "
                "(dropping the agent's unsaved run)"
            ) from error
        raise UsageError(
            f"thread {self.thread_id!r}: the last save failed ({error!r}); await agent.save() "
            "tries again, await agent.load() takes the stored thread"
        ) from error

    # -- runs --------------------------------------------------------------------------------

    def _input(
        self,
        run_id: str | None,
        tools: Iterable[Any],
        context: Iterable[Any],
        forwarded_props: Any,
        resume: Iterable[Any] | None,
        parent_run_id: str | None,
    ) -> tuple[dict[str, Any], RunAgentInput]:
        messages = []
        held = self._server_ids if self.send_messages == "new" else None
        for message in self.store.messages_wire():
            if message.get("role") == "activity":
                continue  # never sent, as the official client does
            if held is not None and message.get("id") in held:
                continue  # the gateway holds it
            if "subagentRunId" in message and message["subagentRunId"] is None:
                del message["subagentRunId"]
            messages.append(message)
        body: dict[str, Any] = {
            "threadId": self.thread_id,
            "runId": run_id or str(uuid.uuid4()),
            "protocolVersion": "1.0",
            "tools": [_as_wire(t) for t in self._run_tools(tools)[1]],
            "context": [_as_wire(c) for c in context],
            "forwardedProps": {} if forwarded_props is None else _as_wire(forwarded_props),
            "state": self.store.state,
            "messages": messages,
        }
        if parent_run_id is not None:
            body["parentRunId"] = parent_run_id
        if resume is not None:
            body["resume"] = [_as_wire(r) for r in resume]
        # Validate as the official enforceOutgoingInput does (strip unknown members with a
        # report, reject malformed ones): the input is checked as RUN_STARTED.input would be.
        decoder = EventDecoder(mode=self.mode, on_report=self.on_report)
        probe = {"type": "RUN_STARTED", "threadId": "-", "runId": "-", "input": body}
        try:
            event = decoder.decode(probe)
        except DataError as exc:
            path = exc.path.replace("$.input", "$", 1) if exc.path else None
            raise DataError(
                f"the run input is not a valid RunAgentInput: {exc.reason}", path=path
            ) from exc
        assert isinstance(event, RunStartedEvent) and event.input is not UNSET
        checked = event.input
        wire: dict[str, Any] = msgspec.to_builtins(checked)
        return wire, checked

    @contextlib.asynccontextmanager
    async def run(
        self,
        *,
        run_id: str | None = None,
        tools: Iterable[Any] = (),
        context: Iterable[Any] = (),
        forwarded_props: Any = None,
        resume: Iterable[Any] | None = None,
        parent_run_id: str | None = None,
    ) -> AsyncIterator[AgentRun]:
        """Start a run and stream its updates: ``async with agent.run() as run: async for u in run``.

        ``tools``, ``context`` and ``resume`` are wire JSON dicts or the Structs
        (:class:`~agui_meta.events.Tool`, :class:`~agui_meta.events.InputContext`,
        :class:`~agui_meta.events.ResumeEntry`, e.g. from :func:`~agui_meta.build_resume_array`);
        ``tools`` may also hold functions and :class:`~agui_meta.ClientTool` objects (declared
        here; :meth:`run_agent` runs them). They follow the agent's own ``tools``.
        Leaving the block early (``break``, an error, a cancellation) closes the response and
        the pipeline; cancellation is never swallowed.

        :raises ~agui_meta.UsageError: a run is already in progress on this agent, or pending
            interrupts are not answered by ``resume`` (before anything is sent).
        :raises RunFailed: at the end of the stream, when the run sent RUN_ERROR.
        :raises IncompleteStream: the stream ended before RUN_FINISHED or RUN_ERROR.
        :raises HttpStatusError: the endpoint answered with an error status.
        :raises ~agui_meta.threads.VersionConflict: (with a ``thread_store``) the run could
            not be saved: another writer saved the thread meanwhile (see :meth:`save`). The
            run's own error, if it had one, is the conflict's ``__cause__``.

        With a ``thread_store``, the thread is loaded first if it has not been (:meth:`load`),
        a run refuses to start while the last save failed (:class:`~agui_meta.UsageError`), and
        after every run that received events — ended by ``RUN_FINISHED``, ``RUN_ERROR``, an
        abort, a broken stream or an error of your own in the block — the thread is saved
        (:meth:`save`). A run cancelled from outside is not saved (the cancellation goes
        through at once); the next save includes what it assembled.
        """
        if self._busy:
            raise UsageError("this agent already has a run in progress")
        if self.thread_store is not None:
            if self._snapshot is None:
                await self.load()
            self._check_saved()
        input, checked = self._input(run_id, tools, context, forwarded_props, resume, parent_run_id)
        check_resume(
            self.store.pending_interrupts, None if checked.resume is UNSET else checked.resume
        )
        body = msgspec.json.encode(input)
        _require_httpx()
        self._busy = True
        try:
            async with self._run(body, input, checked) as run:
                yield run
            self._note_server_thread()
        finally:
            self._busy = False

    async def record_inspector(
        self,
        path: str | os.PathLike[str],
        *,
        run_id: str | None = None,
        tools: Iterable[Any] = (),
        context: Iterable[Any] = (),
        forwarded_props: Any = None,
        on_chunk: Callable[[bytes], object] | None = None,
    ) -> None:
        """Run the agent once and write the exchange to ``path`` as an agui-inspector session
        file (format version 0), as ``agui-meta record URL --inspector OUT.json`` does.

        The request is the one :meth:`run` would send (the thread's messages and state, the
        agent's tools then ``tools``, ``context``, ``forwarded_props``); the response is
        recorded as it arrives — its frames with their timing and verdicts, the runs, and
        ``agui-meta validate``'s findings — and not applied: the thread does not change.
        ``on_chunk`` receives each chunk of the body, unchanged (to save the stream as well).

        :raises HttpStatusError: the endpoint answered an error status or a redirect; the
            file is written (the status and the body's first bytes).
        :raises IncompleteStream: the connection dropped; the file is written (what arrived,
            and the transport error).
        :raises httpx.ConnectError: the endpoint cannot be reached (as for the other httpx
            errors of a request never answered): nothing is written.
        :raises OSError: ``path`` cannot be written.
        """
        from ._inspector import InspectorRecording, record_exchange

        http = _require_httpx()
        input, _ = self._input(run_id, tools, context, forwarded_props, None, None)
        body = msgspec.json.encode(input)
        headers = {
            "Accept-Encoding": ACCEPT_ENCODING,
            **self.headers,
            "Content-Type": "application/json",
            "Accept": ACCEPT[self.accept],
        }
        recording = InspectorRecording(self.url, body)
        failure: Exception | None = None
        async with contextlib.AsyncExitStack() as stack:
            client: httpx.AsyncClient
            if self.http_client is not None:
                client = self.http_client
            else:
                timeout = (
                    self.timeout if self.timeout is not None else http.Timeout(10.0, read=300.0)
                )
                client = await stack.enter_async_context(http.AsyncClient(timeout=timeout))
            try:
                await record_exchange(
                    client, self.url, body, headers, recording=recording, on_chunk=on_chunk
                )
            except HttpStatusError as exc:
                failure = exc
            except http.HTTPError as exc:
                if recording.elapsed_ms is None:
                    raise  # nothing was exchanged: nothing to record
                failure = IncompleteStream(
                    f"the connection to {self.url} dropped after {recording.events} events: "
                    f"{type(exc).__name__}: {exc}",
                    recording.events,
                )
                failure.__cause__ = exc
        document = await recording.session(input)
        await anyio.Path(path).write_bytes(document)
        if failure is not None:
            raise failure

    def _note_server_thread(self) -> None:
        if self.send_messages == "new":
            self._server_ids = {item.id for item in self.store.messages()}

    def _gateway_url(self, action: str) -> str:
        """The gateway route ``action`` of the agent whose run route is ``url``."""
        base, _, last = self.url.rstrip("/").rpartition("/")
        if last not in ("run", "connect", "stop") or not base:
            raise UsageError(
                f"HttpAgent.{action}() talks to an agui-meta gateway: the agent's URL should be "
                f"its run route, .../agents/NAME/run (it is {self.url!r})"
            )
        return f"{base}/{action}"

    @contextlib.asynccontextmanager
    async def connect(self, *, follow: bool = False) -> AsyncIterator[AgentRun]:
        """Join the thread on an agui-meta gateway: ``async with agent.connect() as run``.

        The stream (``POST .../agents/NAME/connect``) brings the agent's store to the thread
        the gateway holds (its messages and state), then, when a run is active, streams that
        run live to its end; with ``follow=True`` it stays open and streams the thread's later
        runs too, until the block is left. The agent's URL is the gateway's run route.
        Iterate ``run`` as a run of :meth:`run`; ``run.result`` is the last run's result.

        :raises ~agui_meta.UsageError: a run is in progress on this agent.
        :raises HttpStatusError: ``404``: the gateway holds no such thread (for this caller).
        """
        if self._busy:
            raise UsageError("this agent already has a run in progress")
        url = self._gateway_url("connect")
        run_id = str(uuid.uuid4())
        input: dict[str, Any] = {"threadId": self.thread_id, "runId": run_id, "messages": []}
        checked = RunAgentInput(thread_id=self.thread_id, run_id=run_id, messages=[])
        body = msgspec.json.encode({**input, "follow": follow})
        _require_httpx()
        self._busy = True
        try:
            async with self._run(body, input, checked, url=url) as run:
                yield run
            self._note_server_thread()
        finally:
            self._busy = False

    async def connect_agent(self) -> RunResult:
        """Join the thread on a gateway until the active run (if any) ends (the official
        ``connectAgent``); see :meth:`connect`."""
        async with self.connect() as run:
            async for _ in run.batches():
                pass
        return run.result

    async def stop(self, run_id: str | None = None) -> dict[str, Any]:
        """Stop the thread's active run on an agui-meta gateway (``POST .../stop``).

        The gateway cancels the agent and the run ends with ``RUN_FINISHED`` outcome
        ``cancelled`` (what a client streaming it receives). Returns the gateway's answer
        (``{"threadId", "runId", "ended"}``).

        :raises HttpStatusError: ``404``: no run is active on the thread (or not ``run_id``).
        """
        http = _require_httpx()
        url = self._gateway_url("stop")
        body: dict[str, Any] = {"threadId": self.thread_id}
        if run_id is not None:
            body["runId"] = run_id
        headers = {**self.headers, "Content-Type": "application/json"}
        async with contextlib.AsyncExitStack() as stack:
            client: httpx.AsyncClient
            if self.http_client is not None:
                client = self.http_client
            else:
                timeout = self.timeout if self.timeout is not None else http.Timeout(60.0)
                client = await stack.enter_async_context(http.AsyncClient(timeout=timeout))
            answer = await stack.enter_async_context(
                client.stream("POST", url, content=msgspec.json.encode(body), headers=headers)
            )
            text = await _small_body(answer, url, self.max_frame_size, "the stop answer")
        try:
            found: dict[str, Any] = msgspec.json.decode(text, type=dict)
        except msgspec.DecodeError as exc:
            raise DataError(f"the stop answer from {url} is not a JSON object: {exc}") from None
        return found

    @contextlib.asynccontextmanager
    async def _run(
        self, body: bytes, input: dict[str, Any], checked: RunAgentInput, url: str | None = None
    ) -> AsyncIterator[AgentRun]:
        http = _require_httpx()
        watch = _Watch()
        stages = DefaultStages(self.store, ledger=self.ledger)
        # Trace context: the span current as the run starts goes with each request, and
        # parents the spans of the run's otel() stages.
        self._trace = current_carrier()
        context = current_context()
        for stage in self.stages:
            if hasattr(stage, "parent_context"):  # an otel() stage
                stage.parent_context = context
        self._aborted = False
        failure: Exception | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client: httpx.AsyncClient
                    if self.http_client is not None:
                        client = self.http_client
                    else:
                        timeout = self.timeout
                        if timeout is None:
                            timeout = http.Timeout(10.0, read=300.0)
                        client = await stack.enter_async_context(http.AsyncClient(timeout=timeout))
                    source = _Source(self, client, body, watch, url)
                    pipeline: Pipeline[Update] = wrap(
                        source.frames(),
                        *(middleware(mw, checked) for mw in self.middleware),
                        *self.stages,
                        *stages,
                        watch,
                        mode=self.mode,
                        on_report=self.on_report,
                    )
                    async with pipeline:
                        yield AgentRun(self, pipeline, input, watch)
            except BaseException as exc:
                self.ledger.close()  # the run's record ends as "incomplete" if it was open
                if self.thread_store is None or not isinstance(exc, Exception):
                    raise  # cancellations (an abort's included) go through the scope
                failure = exc  # raised after the save
            finally:
                self._scope = None
        if scope.cancelled_caught and self._aborted:
            failure = RunFailed("the run was aborted (HttpAgent.abort_run())", "abort")
        if self.thread_store is not None and watch.updates:
            try:
                await self._save()
            except Exception as exc:
                if failure is None:
                    raise
                raise exc from failure
        if failure is not None:
            raise failure

    async def run_agent(
        self,
        *,
        run_id: str | None = None,
        tools: Iterable[Any] = (),
        context: Iterable[Any] = (),
        forwarded_props: Any = None,
        resume: Iterable[Any] | None = None,
        parent_run_id: str | None = None,
    ) -> RunResult:
        """Run the agent and return the :class:`RunResult` (the official ``runAgent``).

        The thread's messages and state are updated as the events arrive (also when the run
        fails part way). Raises as :meth:`run` does.

        With client tools (``HttpAgent(tools=[function, ...])``, or functions in this call's
        ``tools``): while a run ends with success (not an interrupt or a cancellation) leaving
        calls to them unanswered, they are executed (:meth:`call_tools`), their results
        appended, and the agent run again — with the same ``tools``, ``context`` and
        ``forwarded_props``, a new run id, no ``resume`` — until no call of a client tool is
        pending (or calls to tools the client does not execute are pending too: those are the
        caller's to answer). The result is the last run's; ``agent.ledger`` has every run.
        Each run, and the tool calls between them, can be cancelled; a cancelled round leaves
        the thread as the last completed step left it.

        :raises ~agui_meta.ToolRoundsExceeded: a run still left client calls pending after
            ``max_tool_rounds`` runs (they are not executed; the error has the last result).
        """
        tools, context = tuple(tools), tuple(context)  # sent again by every round
        executed, _ = self._run_tools(tools)
        rounds = 0
        while True:
            async with self.run(
                run_id=run_id,
                tools=tools,
                context=context,
                forwarded_props=forwarded_props,
                resume=resume,
                parent_run_id=parent_run_id,
            ) as run:
                async for _ in run.batches():
                    pass
            result = run.result
            rounds += 1
            succeeded = result.outcome is None or isinstance(result.outcome, RunSuccess)
            if not executed or not succeeded or result.pending_interrupts:
                return result
            mine, others = self._unanswered_calls(executed)
            if not mine:
                return result
            if rounds >= self.max_tool_rounds:
                raise ToolRoundsExceeded(rounds, result)
            await self._call_tools(executed)
            if others:
                return result
            run_id = resume = parent_run_id = None

    def _result_of(self, run: AgentRun, finished: RunFinishedEvent) -> RunResult:
        known = run._known
        new = [item.to_wire() for item in self.store.messages() if item.id not in known]
        records = self.ledger.runs
        record = records[-1] if records else None
        outcome = record.outcome if record is not None else None
        success = finished.outcome is UNSET or isinstance(outcome, RunSuccess)
        result = finished.result if success and finished.result is not UNSET else None
        return RunResult(
            thread_id=run.input["threadId"],
            run_id=run.input["runId"],
            new_messages=new,
            result=result,
            outcome=outcome,
            usage=[] if finished.usage is UNSET else [*map(Usage.from_wire, finished.usage)],
            pending_interrupts=list(self.store.pending_interrupts),
            pending_tool_call_ids=self.store.pending_tool_call_ids,
            record=record,
            reports=list(run.reports),
            trace_id=trace_id(self._trace.get("traceparent"))
            or trace_id((record.started_metadata or {}).get(TRACEPARENT_KEY) if record else None),
        )


def _backoff(attempt: int, base: float, cap: float) -> float:
    """The wait before the ``attempt``-th reconnection (from 1) of a run: ``base`` (the server's
    ``retry`` or ``reconnect_delay``) doubled at each attempt, at least :data:`MIN_BACKOFF`
    from the second on, at most ``cap``."""
    if attempt <= 1:
        return min(base, cap)
    return min(max(base, MIN_BACKOFF) * 2.0 ** min(attempt - 1, 64), cap)


class _Source:
    """The frames of one run: the POST, the status and media type checks, reconnection."""

    def __init__(
        self,
        agent: HttpAgent,
        client: httpx.AsyncClient,
        body: bytes,
        watch: _Watch,
        url: str | None = None,
    ):
        self.agent = agent
        self.trace = dict(agent._trace)  # traceparent, tracestate: sent with each request
        self.url = agent.url if url is None else url
        self.client = client
        self.body = body
        self.watch = watch

    def _framer(self, response: httpx.Response) -> Framer:
        agent = self.agent
        content_type = response.headers.get("content-type")
        if media_type(content_type) == PROTOBUF_MEDIA_TYPE:
            raise ResponseError(
                f"{agent.url} answered with the AG-UI protobuf media type ({PROTOBUF_MEDIA_TYPE}),"
                " which agui-meta does not decode; it asks for SSE or JSON lines "
                "(HttpAgent(accept='sse' | 'jsonl'))"
            )
        return Framer(
            media_format(content_type) or "auto",
            max_frame_size=agent.max_frame_size,
            invalid_utf8="frame" if agent.mode == "keep_going" else "raise",
        )

    async def _check(self, response: httpx.Response, resuming: str | None) -> None:
        # Not 2xx: an error, or a redirect the client was not told to follow (httpx follows
        # them when its client has follow_redirects=True); either way its body is not the run.
        if not response.is_success:
            preview = b""
            async with closing_bytes(response) as chunks:
                async for chunk in chunks:
                    preview += chunk
                    if len(preview) >= _BODY_PREVIEW:
                        break
            raise HttpStatusError(response.status_code, preview[:_BODY_PREVIEW], self.url)
        if resuming is not None and response.headers.get(RESUMED_HEADER) is None:
            raise IncompleteStream(
                f"the stream dropped after {self.watch.events} events and {self.agent.url} "
                f"does not resume it: it answered the reconnection (Last-Event-ID: {resuming})"
                f" without the {RESUMED_HEADER} header, so it would run the agent again "
                "(resuming is agui-meta's extension; see EventStreamResponse(replay=...))",
                self.watch.events,
            )

    @contextlib.asynccontextmanager
    async def _connect(
        self, headers: dict[str, str], resuming: str | None, budget: float
    ) -> AsyncIterator[httpx.Response]:
        """The checked response, within ``budget`` seconds (what is left of the reconnect
        timeout; ``inf`` for the first connection)."""
        async with contextlib.AsyncExitStack() as stack:
            with anyio.move_on_after(budget) as connecting:
                response = await stack.enter_async_context(
                    self.client.stream("POST", self.url, content=self.body, headers=headers)
                )
                await self._check(response, resuming)
            if connecting.cancelled_caught:
                raise IncompleteStream(
                    f"the stream dropped after {self.watch.events} events and reconnecting to "
                    f"{self.agent.url} took longer than reconnect_timeout "
                    f"({self.agent.reconnect_timeout:g} s)",
                    self.watch.events,
                )
            yield response

    async def frames(self) -> AsyncIterator[Frame]:
        http = _require_httpx()
        agent = self.agent
        headers = {
            "Accept-Encoding": ACCEPT_ENCODING,  # what the body reader inflates, in bounds
            **agent.headers,
            **self.trace,
            "Content-Type": "application/json",
            "Accept": ACCEPT[agent.accept],
        }
        last_id: str | None = None
        unnamed = 0  # frames received since the last id, without one of their own
        retry_ms: int | None = None
        attempts = 0
        spent = 0.0  # seconds spent reconnecting in the previous drops
        outage: float | None = None  # when the current drop happened
        while True:
            request_headers = dict(headers)
            if last_id is not None:
                request_headers["Last-Event-ID"] = last_id
            dropped: BaseException | None = None
            partial = 0
            received = 0
            try:
                budget = math.inf
                if outage is not None:
                    budget = agent.reconnect_timeout - spent - (anyio.current_time() - outage)
                async with self._connect(request_headers, last_id, budget) as response:
                    if outage is not None:
                        spent += anyio.current_time() - outage
                        outage = None
                    framer = self._framer(response)
                    decoder = framer.decoder
                    try:
                        async with closing_bytes(response) as chunks:
                            async for chunk in chunks:
                                received += len(chunk)
                                for piece in framer.slices(chunk):
                                    for frame in framer.feed(piece):
                                        if frame.id is not None and frame.id != last_id:
                                            last_id = frame.id
                                            unnamed = 0
                                        else:
                                            unnamed += 1
                                        self.watch.events += 1
                                        yield frame
                                if isinstance(decoder, SSEDecoder) and decoder.retry is not None:
                                    retry_ms = decoder.retry
                    except (http.RemoteProtocolError, http.ReadError) as exc:
                        dropped = exc
                        partial = decoder.buffered
                    else:
                        if not agent.reconnect or self.watch.terminal is not None:
                            for frame in framer.close():
                                self.watch.events += 1
                                yield frame
                            return
                        partial = decoder.buffered  # ended cleanly, but the run is not over
            except (http.ConnectError, http.RemoteProtocolError) as exc:
                if last_id is None or attempts == 0:
                    raise  # the endpoint cannot be reached at all
                dropped = exc
            if self.watch.terminal is not None:
                return  # the run is over: a connection closing late loses nothing
            events = self.watch.events
            cut = f" and {received} bytes, in the middle of an event" if partial else ""
            what = (
                f"the connection {'dropped' if dropped is not None else 'ended'} after {events} "
                f"events{cut}, before RUN_FINISHED or RUN_ERROR"
            )
            why = f" ({dropped})" if dropped is not None else ""
            if not agent.reconnect:
                raise IncompleteStream(what + why, events) from dropped
            if last_id is None:
                raise IncompleteStream(
                    f"{what}, and the server sent no event ids, so the run cannot be resumed{why}",
                    events,
                ) from dropped
            if unnamed:
                raise IncompleteStream(
                    f"{what}, and its last {unnamed} event(s) came without an id of their own "
                    f"after {last_id!r}, so resuming from that id would apply them twice{why}",
                    events,
                ) from dropped
            if attempts >= agent.reconnect:
                raise IncompleteStream(
                    f"{what}, and {attempts} reconnection(s) did not complete the run{why}",
                    events,
                ) from dropped
            attempts += 1
            now = anyio.current_time()
            if outage is None:
                outage = now
            base = agent.reconnect_delay if retry_ms is None else retry_ms / 1000
            delay = _backoff(attempts, base, agent.max_reconnect_delay)
            left = agent.reconnect_timeout - spent - (now - outage)
            if delay >= left:
                asked = "" if retry_ms is None else f", the server's retry being {retry_ms} ms"
                raise IncompleteStream(
                    f"{what}, and reconnection {attempts} would wait {delay:g} s{asked}, past "
                    f"reconnect_timeout ({agent.reconnect_timeout:g} s for the reconnections "
                    f"of a run, {max(left, 0.0):g} s left){why}",
                    events,
                ) from dropped
            await anyio.sleep(delay)
