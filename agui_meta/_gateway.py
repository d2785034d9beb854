"""The gateway: an ASGI app in front of AG-UI agents, whose runs outlive their connections.

Routes (SSE answers carry an ``id:`` on every event of a run):

=============================  ==============================================================
``POST /agents/{name}/run``    a ``RunAgentInput``; streams the run. The run is detached from
                               the request; the same ``threadId`` + ``runId`` again joins it;
                               ``Last-Event-ID`` resumes after that event.
``POST /agents/{name}/connect`` ``{"threadId", "follow"?}``: the thread as stored, then the
                               active run joined live; ``follow`` streams later runs too.
``POST /agents/{name}/stop``   ``{"threadId", "runId"?}``: the run is cancelled and ends with
                               ``RUN_FINISHED`` outcome ``cancelled``.
``GET /threads``               the caller's threads.
``GET /threads/{threadId}``    messages, state, interrupts, ledger, version, active run.
``DELETE /threads/{threadId}`` forget the thread (``409`` while a run is active).
=============================  ==============================================================

Threads are the server's: a client sends only its new messages (a message the thread holds may
be sent again unchanged; changed, it is refused with ``409``), the agent gets the whole thread.
One run per thread at a time. Every thread belongs to the scope of the request that first ran
it; another scope's thread is a ``404`` everywhere. Runs live in the gateway's own task group:
the app's lifespan (or ``async with gateway.running()`` when the gateway is mounted in an app
whose lifespan does not run it) starts it, and stops every run on the way out.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, NoReturn, Union

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ._agents import GatewayAgent, as_agent
from ._budget import Budget
from ._catalog import Catalog, MemoryCatalog
from ._decode import EventDecoder
from ._events import RunAgentInput, RunStartedEvent
from ._exceptions import AtCapacity, DataError, Report, ThreadBusy, UsageError
from ._join import thread_prelude
from ._ledger import RunRecord
from ._registry import RunRegistry
from ._replay import ReplayReader, parse_event_id
from ._runs import MemoryRuns, thread_store
from ._server import EventStreamResponse
from ._threads import MemoryThreadStore, ThreadSnapshot, ThreadStore

__all__ = ["Gateway", "ScopeResolver"]

logger = logging.getLogger("agui_meta.gateway")

ScopeResolver = Callable[[Request], Union[str, Awaitable[str]]]

_JSON = "application/json"


class _Refused(Exception):
    """An answer other than a stream: status, message, headers."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def _refuse(status: int, message: str, headers: Mapping[str, str] | None = None) -> NoReturn:
    raise _Refused(status, message, headers)


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        msgspec.json.encode(data), status_code=status, media_type=_JSON, headers=headers
    )


def _decode_input(data: Any) -> RunAgentInput:
    """``data`` checked as a ``RunAgentInput`` (as RUN_STARTED.input is), or 400.

    Unknown members are dropped, as the official client drops them from its input; an element
    the decoder would drop (a message without a role, say) is refused instead: it is input."""
    probe = {"type": "RUN_STARTED", "threadId": "-", "runId": "-", "input": data}
    reports: list[Report] = []
    try:
        event = EventDecoder(on_report=reports.append).decode(probe)
    except DataError as exc:
        where = f" at {exc.path.replace('$.input', '$', 1)}" if exc.path else ""
        _refuse(400, f"the body is not a valid RunAgentInput{where}: {exc.reason}")
    for report in reports:
        if report.code != "unknown-field":
            where = f" at {report.path.replace('$.input', '$', 1)}" if report.path else ""
            detail = report.message.removesuffix(" on RUN_STARTED")
            _refuse(
                400,
                f"the body is not a valid RunAgentInput{where}: the decoder {detail}; "
                "the gateway refuses input rather than drop part of it",
            )
    assert isinstance(event, RunStartedEvent) and event.input is not UNSET
    return event.input


def _canonical(value: Any) -> Any:
    """Wire JSON with ``null`` members left out (absent and ``null`` read the same)."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _new_messages(
    thread_id: str, stored: list[dict[str, Any]], sent: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages of ``sent`` the thread does not hold; 409 for one that rewrites it."""
    by_id = {message.get("id"): message for message in stored}
    new = []
    for index, message in enumerate(sent):
        old = by_id.get(message.get("id"))
        if old is None:
            new.append(message)
        elif _canonical(old) != _canonical(message):
            _refuse(
                409,
                f"messages[{index}] (id {message.get('id')!r}) differs from the message of that "
                f"id in thread {thread_id!r}: the gateway holds the thread, a run may add "
                "messages but not change stored ones (send only the new messages, or the "
                f"thread's messages unchanged, as GET /threads/{thread_id} gives them)",
            )
    return new


class _ReaderResponse(EventStreamResponse):
    """SSE from a reader of the run log (the gateway's events are encoded once, by the run)."""

    def __init__(
        self, reader: ReplayReader, *, keepalive: float | None, resumed: str | None = None
    ) -> None:
        super().__init__((), keepalive=keepalive, format="sse")
        self.reader = reader
        self.resumed = resumed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(self.reader, False, receive, send, resumed=self.resumed)
        finally:
            with anyio.CancelScope(shield=True):
                await self.reader.aclose()


class _ConnectReader:
    """The prelude, then the joined run, then (``follow``) every later run of the thread."""

    def __init__(
        self,
        runs: RunRegistry,
        catalog: Catalog,
        scope: str,
        thread_id: str,
        prelude: list[bytes],
        reader: ReplayReader | None,
        seen: int,
        follow: bool,
    ) -> None:
        self.runs = runs
        self.catalog = catalog
        self.scope = scope
        self.thread_id = thread_id
        self.prelude = prelude
        self.inner = reader
        self.seen = seen
        self.follow = follow

    async def read(self, wait: float) -> list[bytes] | None:
        if self.prelude:
            frames, self.prelude = self.prelude, []
            return frames
        while True:
            if self.inner is not None:
                frames_or_end = await self.inner.read(wait)
                if frames_or_end is not None:
                    return frames_or_end
                await self.inner.aclose()
                self.inner = None
            if not self.follow:
                return None
            count, run = await self.runs.latest(self.thread_id)
            if count <= self.seen:
                await self.runs.wait_started(self.thread_id, self.seen, wait)
                if (await self.runs.latest(self.thread_id))[0] <= self.seen:
                    if await self.catalog.owner(self.thread_id) != self.scope:
                        return None  # the thread was deleted: nothing more to follow
                    return []  # a keepalive while the thread is idle
                continue
            self.seen = count
            if run is not None and run.scope == self.scope:
                self.inner = run.reader(0)

    async def aclose(self) -> None:
        if self.inner is not None:
            inner, self.inner = self.inner, None
            await inner.aclose()


class Gateway:
    """An ASGI app fronting AG-UI agents, with detached runs, connect, stop and owned threads.

    :param agents: name -> agent: an async callable of the run input (a
        :class:`~agui_meta.events.RunAgentInput`) returning an async iterator of events, an ASGI
        app serving AG-UI at ``/`` (:class:`~agui_meta.gateway.AsgiAgent` for another path), or
        an upstream endpoint's URL.
    :param threads: the thread store (a :class:`~agui_meta.threads.MemoryThreadStore` by
        default); it needs a ``delete`` method (both built-in stores have one).
    :param catalog: thread ownership and the journal of runs in flight
        (:class:`~agui_meta.gateway.MemoryCatalog` by default; use
        :class:`~agui_meta.gateway.SQLiteCatalog` with an SQLite thread store, so that a run in
        flight at a crash is recorded as ended with an error at the next start).
    :param scope: the request's scope (a callable of the Starlette ``Request``, sync or async;
        raise ``starlette.exceptions.HTTPException`` to refuse a request). One scope, ``""``,
        by default.
    :param on_busy: a run posted to a thread with an active run is ``"refuse"``-d (409, naming
        the active run) or ``"supersede"``-s it (the active run is stopped first).
    :param max_runs: active runs at most; past it, ``503`` with ``Retry-After: retry_after``.
    :param linger: seconds a run goes on with no client reading it (then it is cancelled).
    :param max_run_time: seconds a run may take (then it is cancelled).
    :param max_events: events kept per run (a client further behind loses the stream).
    :param keep: seconds an ended run stays joinable and resumable (at most ``max_kept`` runs).
    :param keepalive: seconds without an event before an SSE comment is sent.
    :param max_body: the largest request body, in bytes (``413`` past it).
    :param budget: a :class:`~agui_meta.Budget` per scope (the scope resolver's scope, not
        run metadata): a run whose scope is over it ends at once with ``RUN_ERROR`` code
        ``budget_exceeded`` (its agent is not called); each run's usage is charged to its scope
        once, at its end; a run that takes its scope past a limit is reported (the budget's
        ``on_exceeded``) and the scope's other active runs are stopped the same way.
    :param runs: what makes the registry of runs from the thread store, the catalog and the
        options above (:class:`~agui_meta.gateway.MemoryRuns`, the default: runs in this
        process; :func:`agui_meta.redis.redis_gateway` passes Redis runs shared by replicas).
    """

    def __init__(
        self,
        agents: Mapping[str, Any],
        *,
        threads: ThreadStore | None = None,
        catalog: Catalog | None = None,
        scope: ScopeResolver | None = None,
        on_busy: Literal["refuse", "supersede"] = "refuse",
        max_runs: int = 100,
        linger: float = 30.0,
        max_run_time: float = 3600.0,
        max_events: int = 10_000,
        keep: float = 60.0,
        max_kept: int = 1000,
        keepalive: float | None = 15.0,
        retry_after: int = 1,
        max_body: int = 16 * 1024 * 1024,
        stop_timeout: float = 30.0,
        runs: Callable[..., MemoryRuns] | None = None,
        budget: Budget[Any] | None = None,
    ) -> None:
        if on_busy not in ("refuse", "supersede"):
            raise UsageError(f"on_busy must be 'refuse' or 'supersede', got {on_busy!r}")
        if budget is not None and not isinstance(budget, Budget):
            raise UsageError(f"budget must be an agui_meta.Budget, got {budget!r}")
        self.agents: dict[str, GatewayAgent] = {name: as_agent(a) for name, a in agents.items()}
        self.threads: ThreadStore = threads if threads is not None else MemoryThreadStore()
        if not callable(getattr(self.threads, "delete", None)):
            raise UsageError(
                f"the gateway's thread store needs a delete method; {type(self.threads).__name__}"
                " has none"
            )
        self.catalog: Catalog = catalog if catalog is not None else MemoryCatalog()
        self.resolve_scope = scope
        self.on_busy = on_busy
        #: The runs of this process (inspect them here); the routes use :attr:`runs`.
        self.registry = (runs or MemoryRuns)(
            self.threads,
            self.catalog,
            max_runs=max_runs,
            linger=linger,
            max_run_time=max_run_time,
            max_events=max_events,
            keep=keep,
            max_kept=max_kept,
            stop_timeout=stop_timeout,
            budget=budget,
        )
        #: What the routes know of the runs: the :class:`~agui_meta._registry.RunRegistry`
        #: contract (in this process, :attr:`registry`).
        self.runs: RunRegistry = self.registry
        self.keepalive = keepalive
        self.retry_after = retry_after
        self.max_body = max_body
        self.stop_timeout = stop_timeout
        self._running = False
        self.app = Starlette(
            routes=[
                Route("/agents/{name}/run", self._run, methods=["POST"]),
                Route("/agents/{name}/connect", self._connect, methods=["POST"]),
                Route("/agents/{name}/stop", self._stop, methods=["POST"]),
                Route("/threads", self._list, methods=["GET"]),
                Route("/threads/{thread_id}", self._thread, methods=["GET", "DELETE"]),
            ],
            lifespan=lambda app: self.running(),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # -- lifetime ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The gateway's task group: runs start in it and are stopped when the block exits.

        On entry, runs a crash left in flight are recorded as ended with an error."""
        if self._running:
            raise UsageError("the gateway is already running")
        await self._recover()
        async with self.runs.running():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def _recover(self) -> None:
        """Record the runs a crash left in flight as ended with an error (each thread once)."""
        for thread_id, run_id in await self.catalog.in_flight():
            record = RunRecord(
                thread_id=thread_id,
                run_id=run_id,
                status="error",
                error_message="the gateway stopped while the run was in flight",
                error_code="gateway_restart",
            )
            try:
                found = await self.threads.load(thread_id)
                snapshot = found or ThreadSnapshot(thread_id=thread_id)
                await self.threads.save(snapshot.advance(snapshot.to_store(), [record]))
                await self.catalog.run_ended(thread_id, run_id)
            except Exception:  # one bad thread does not keep the gateway from starting
                logger.exception("run %s of thread %s could not be closed", run_id, thread_id)
            else:
                logger.warning("run %s of thread %s was in flight at a crash", run_id, thread_id)

    # -- request helpers ---------------------------------------------------------------------

    async def _scope(self, request: Request) -> str:
        if self.resolve_scope is None:
            return ""
        found = self.resolve_scope(request)
        if inspect.isawaitable(found):
            found = await found
        if not isinstance(found, str):
            raise UsageError(f"the gateway's scope resolver returned {found!r}, not a str")
        return found

    async def _body(self, request: Request) -> Any:
        size = 0
        chunks = []
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                _refuse(413, f"the body is larger than {self.max_body} bytes")
            chunks.append(chunk)
        try:
            data = msgspec.json.decode(b"".join(chunks))
        except msgspec.DecodeError as exc:
            _refuse(400, f"the body is not JSON: {exc}")
        if not isinstance(data, dict):
            _refuse(400, f"the body is a JSON {type(data).__name__}, not an object")
        return data

    def _agent(self, request: Request) -> tuple[str, GatewayAgent]:
        name = request.path_params["name"]
        agent = self.agents.get(name)
        if agent is None:
            _refuse(404, f"no agent named {name!r} (agents: {', '.join(sorted(self.agents))})")
        return name, agent

    def _check_running(self) -> None:
        if not self._running:
            _refuse(
                503,
                "the gateway is not running: its lifespan has not started "
                "(mount it with the lifespan, or enter `async with gateway.running()`)",
            )

    async def _owned(self, scope: str, thread_id: str) -> bool:
        """Whether the thread is ``scope``'s (``False``: unknown, or another scope's)."""
        return await self.catalog.owner(thread_id) == scope

    @staticmethod
    def _thread_id(data: Mapping[str, Any]) -> str:
        thread_id = data.get("threadId")
        if not isinstance(thread_id, str) or not thread_id:
            _refuse(400, "the body needs a threadId (a non-empty string)")
        return thread_id

    async def _room(self, thread_id: str) -> None:
        """409 (a busy thread) or 503 (a full gateway) when a run cannot start now."""
        try:
            await self.runs.check_room(thread_id)
        except ThreadBusy as busy:
            _refuse(409, str(busy))
        except AtCapacity as full:
            _refuse(503, str(full), {"Retry-After": str(self.retry_after)})

    def _respond(self, reader: ReplayReader, resumed: str | None = None) -> Response:
        return _ReaderResponse(reader, keepalive=self.keepalive, resumed=resumed)

    async def _handle(
        self, request: Request, route: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        try:
            return await route(request)
        except _Refused as refused:
            return _json({"error": refused.message}, refused.status, refused.headers)

    # -- POST /agents/{name}/run ---------------------------------------------------------------

    async def _run(self, request: Request) -> Response:
        return await self._handle(request, self._run_route)

    async def _run_route(self, request: Request) -> Response:
        self._check_running()
        scope = await self._scope(request)
        name, agent = self._agent(request)
        last_id = request.headers.get("last-event-id")
        if last_id:
            return await self._resume(scope, last_id)
        input = _decode_input(await self._body(request))
        thread_id = input.thread_id
        runs = self.runs
        same = await runs.find(thread_id, input.run_id)
        if same is not None:
            if same.scope != scope:
                _refuse(404, f"no thread {thread_id!r}")
            return self._respond(same.reader(0))  # the same run posted again: joined
        if await self.catalog.owner(thread_id) not in (None, scope):
            _refuse(404, f"no thread {thread_id!r}")
        await self._make_room(thread_id)  # 409 or 503 before the thread is claimed
        if not await self.catalog.claim(scope, thread_id):
            _refuse(404, f"no thread {thread_id!r}")
        base = await self.threads.load(thread_id) or ThreadSnapshot(thread_id=thread_id)
        if base.ledger.last_run_id == input.run_id:
            _refuse(409, f"run {input.run_id!r} of thread {thread_id!r} has ended already")
        sent = [msgspec.to_builtins(m) for m in input.messages]
        new = _new_messages(thread_id, base.messages, sent)
        store = thread_store(base, new)
        new_ids = {message.get("id") for message in new}
        if input.state is not UNSET and input.state != {}:
            store.state = input.state
        whole = msgspec.to_builtins(input)
        whole["messages"] = [m for m in store.messages_wire() if m.get("role") != "activity"]
        whole["state"] = store.state
        same = await runs.find(thread_id, input.run_id)
        if same is not None and same.scope == scope:
            return self._respond(same.reader(0))  # posted twice at once: the first one runs
        try:
            run = await runs.start(
                scope=scope,
                agent_name=name,
                agent=agent,
                input=_decode_input(whole),
                store=store,
                base=base,
                new_messages=[m for m in input.messages if m.id in new_ids],
            )
        except ThreadBusy as busy:
            _refuse(409, str(busy))
        except AtCapacity as full:
            _refuse(503, str(full), {"Retry-After": str(self.retry_after)})
        return self._respond(run.reader(0))

    async def _make_room(self, thread_id: str) -> None:
        active = await self.runs.active(thread_id)
        if active is not None and self.on_busy == "supersede":
            await active.stop("superseded")
            await active.wait_ended(self.stop_timeout)
        await self._room(thread_id)

    async def _resume(self, scope: str, last_id: str) -> Response:
        parsed = parse_event_id(last_id)
        run = await self.runs.by_key(parsed[0]) if parsed is not None else None
        if parsed is None or run is None or run.scope != scope:
            _refuse(410, f"cannot resume: no run with event id {last_id!r} is held")
        if parsed[1] >= run.events:
            _refuse(410, f"cannot resume: event id {last_id!r} was never sent")
        return self._respond(run.reader(parsed[1] + 1), resumed=last_id)

    # -- POST /agents/{name}/connect -----------------------------------------------------------

    async def _connect(self, request: Request) -> Response:
        return await self._handle(request, self._connect_route)

    async def _connect_route(self, request: Request) -> Response:
        scope = await self._scope(request)
        self._agent(request)
        last_id = request.headers.get("last-event-id")
        if last_id:
            return await self._resume(scope, last_id)  # the live part of a connect
        data = await self._body(request)
        thread_id = self._thread_id(data)
        follow = data.get("follow", False)
        query = request.query_params.get("follow")
        if query is not None:
            follow = query.lower() in ("1", "true", "yes")
        if not isinstance(follow, bool):
            _refuse(400, f"follow is true or false, not {follow!r}")
        if not await self._owned(scope, thread_id):
            _refuse(404, f"no thread {thread_id!r}")
        runs = self.runs
        run = await runs.active(thread_id)
        if run is None:
            snapshot = await self.threads.load(thread_id)
            run = await runs.active(thread_id)  # a run may have started meanwhile
        seen, _ = await runs.latest(thread_id)
        reader: ReplayReader | None
        if run is not None:
            prelude, reader = await run.join()
        else:
            stored = snapshot if snapshot is not None else ThreadSnapshot(thread_id=thread_id)
            run_id = data.get("runId")
            if not isinstance(run_id, str) or not run_id:
                run_id = f"connect-{uuid.uuid4().hex}"
            prelude = thread_prelude(
                thread_id, run_id, stored.messages, stored.state, stored.pending_interrupts
            )
            reader = None
        return self._respond(
            _ConnectReader(runs, self.catalog, scope, thread_id, prelude, reader, seen, follow)
        )

    # -- POST /agents/{name}/stop --------------------------------------------------------------

    async def _stop(self, request: Request) -> Response:
        return await self._handle(request, self._stop_route)

    async def _stop_route(self, request: Request) -> Response:
        scope = await self._scope(request)
        self._agent(request)
        data = await self._body(request)
        thread_id = self._thread_id(data)
        run_id = data.get("runId")
        if run_id is not None and not isinstance(run_id, str):
            _refuse(400, "runId is a string")
        run = await self.runs.active(thread_id)
        if run is None or run.scope != scope or (run_id is not None and run.run_id != run_id):
            what = f"run {run_id!r} is not active" if run_id is not None else "no run is active"
            _refuse(404, f"{what} on thread {thread_id!r}")
        await run.stop("stopped")
        ended = await run.wait_ended(self.stop_timeout)
        return _json({"threadId": thread_id, "runId": run.run_id, "ended": ended})

    # -- /threads ------------------------------------------------------------------------------

    async def _list(self, request: Request) -> Response:
        return await self._handle(request, self._list_route)

    async def _list_route(self, request: Request) -> Response:
        scope = await self._scope(request)
        threads = []
        for thread_id in await self.catalog.threads(scope):
            active = await self.runs.active(thread_id)
            threads.append(
                {"threadId": thread_id, "activeRunId": active.run_id if active else None}
            )
        return _json({"threads": threads})

    async def _thread(self, request: Request) -> Response:
        return await self._handle(request, self._thread_route)

    async def _thread_route(self, request: Request) -> Response:
        scope = await self._scope(request)
        thread_id = request.path_params["thread_id"]
        if not await self._owned(scope, thread_id):
            _refuse(404, f"no thread {thread_id!r}")
        active = await self.runs.active(thread_id)
        if request.method == "DELETE":
            if active is not None:
                _refuse(409, f"thread {thread_id!r} has an active run, {active.run_id!r}")
            await self.threads.delete(thread_id)  # type: ignore[attr-defined]
            await self.catalog.forget(thread_id)
            await self.runs.forget_thread(thread_id)
            return Response(status_code=204)
        snapshot = await self.threads.load(thread_id) or ThreadSnapshot(thread_id=thread_id)
        return _json(
            {
                "threadId": thread_id,
                "version": snapshot.version,
                "messages": snapshot.messages,
                "state": snapshot.state,
                "interrupts": msgspec.to_builtins(snapshot.pending_interrupts),
                "ledger": msgspec.to_builtins(snapshot.ledger),
                "activeRunId": active.run_id if active else None,
            }
        )
