"""EventStreamResponse: stream an agent's events through agui-meta stages to an AG-UI client.

An ASGI response (a Starlette ``Response``, so FastAPI returns it as it is) that takes any
source :func:`agui_meta.wrap` accepts — typically an async generator of ``ag_ui.core`` events —
runs it through the given stages and writes each resulting event as SSE (``data: <json>``, with
an ``id:``) or, when the request asks for it in ``Accept``, as JSON lines.

- Headers: ``Cache-Control: no-cache``, ``X-Accel-Buffering: no`` (so nginx-style proxies do
  not buffer the stream), the content type of the format.
- Keepalive: a comment line (SSE) or an empty line (JSON lines) after ``keepalive`` seconds
  without an event, so that idle connections are not cut by proxies.
- Disconnect: when the client goes away, the pipeline is closed and with it the source (the
  agent's generator gets ``aclose()``), in the request's own task, before the response returns.
- Backpressure: the source is pulled at most ``buffer`` events ahead of the client.
- Replay (agui-meta's extension, with ``replay=ReplayBuffer(...)``, or
  ``agui_meta.redis.RedisReplay(...)`` shared by replicas): the last events of each stream are
  kept, and the source keeps running for ``linger`` seconds after a disconnect; a request
  carrying ``Last-Event-ID`` gets the events after that id (and the header
  ``agui-meta-resumed``) instead of a new run, which is what ``HttpAgent(reconnect=n)`` sends.
  A resumed stream whose rest cannot be delivered (abandoned, its producer gone) ends with a
  ``RUN_ERROR`` of code ``"stream_lost"``. The linger counts from the moment the last client
  left, whatever the agent sends meanwhile. A replay store with no room for another stream
  (``ReplayBuffer``'s ``max_streams`` all running) gets the request answered ``503`` with
  ``Retry-After`` and nothing run.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import uuid
from collections.abc import AsyncIterable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

import anyio
from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ._accumulate import Update
from ._client import RESUMED_HEADER
from ._decode import encode_event
from ._events import Event, RunErrorEvent, RunStartedEvent
from ._exceptions import AguiMetaError, DataError, ReplayFull, StreamLost, UsageError
from ._framing import (
    JSONL_MEDIA_TYPE,
    JSONL_MEDIA_TYPES,
    SSE_MEDIA_TYPE,
    encode_jsonl,
    encode_sse,
    media_type,
)
from ._pipeline import Stage, wrap
from ._replay import Replay, ReplayLog, ReplayReader
from ._resume import BufferedStream
from ._stage import Mode, ReportHandler
from ._tracecontext import current_carrier, stamped

__all__ = ["EventStreamResponse"]

logger = logging.getLogger("agui_meta.server")

_NO_BUFFERING = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def _wants_jsonl(accept: str) -> bool:
    kinds = [media_type(part) for part in accept.split(",")]
    return SSE_MEDIA_TYPE not in kinds and any(k in JSONL_MEDIA_TYPES for k in kinds)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class EventStreamResponse(Response):
    """Stream a source of AG-UI events through stages, as SSE or JSON lines.

    :param source: what :func:`agui_meta.wrap` accepts (an async generator of ``ag_ui.core``
        events, dicts, agui-meta events, bytes of a stream…).
    :param stages: stages to run, as in ``wrap``; what they output is written (an
        :class:`~agui_meta.Update`'s event, or an event).
    :param format: ``"auto"`` (JSON lines when the request's ``Accept`` asks for a JSON-lines
        type and not for ``text/event-stream``; SSE otherwise), ``"sse"`` or ``"jsonl"``.
    :param keepalive: seconds without an event before a keepalive line (``None``: never).
    :param replay: a shared :class:`ReplayBuffer` (or any ``Replay``, such as
        ``agui_meta.redis.RedisReplay``) to serve ``Last-Event-ID`` reconnections.
    :param buffer: how many events the source may run ahead of the client.
    :param retry: the SSE ``retry`` (milliseconds) sent first when ``replay`` is set.
    :param mode, on_report: as in ``wrap``.
    :param trace_context: stamp the current OpenTelemetry span's W3C context in each
        RUN_STARTED's metadata, under ``w3c.traceparent`` and ``w3c.tracestate`` (when
        ``opentelemetry-api`` is installed and a span is current: the one current when the
        response is made, else when it is served, such as an instrumented server's request
        span), so that clients and browsers can join the trace; a RUN_STARTED that carries a
        ``w3c.traceparent`` of its own keeps it.

    If the source or a stage fails after the response has started, the client gets a
    ``RUN_ERROR`` event (code ``"server_error"``; the message of an agui-meta error, the
    exception's type otherwise) and the error is logged to the ``agui_meta.server`` logger.

    ::

        async def endpoint(request):
            run = agui_meta.RunAgentInput ...  # parse the body
            return agui_meta.EventStreamResponse(my_agent(run), agui_meta.Ledger())
    """

    media_type = SSE_MEDIA_TYPE

    def __init__(
        self,
        source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
        *stages: Stage,
        format: Literal["auto", "sse", "jsonl"] = "auto",
        keepalive: float | None = 15.0,
        replay: Replay | None = None,
        buffer: int = 64,
        retry: int = 1000,
        mode: Mode = "default",
        on_report: ReportHandler | None = None,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        background: BackgroundTask | None = None,
        trace_context: bool = True,
    ) -> None:
        if format not in ("auto", "sse", "jsonl"):
            raise UsageError(f"format must be 'auto', 'sse' or 'jsonl', got {format!r}")
        if buffer < 1:
            raise UsageError(f"buffer must be at least 1, got {buffer}")
        self.source = source
        self.stages = stages
        self.format = format
        self.keepalive = keepalive
        self.replay = replay
        self.buffer = buffer
        self.retry = retry
        self.mode: Mode = mode
        self.on_report = on_report
        self.status_code = status_code
        self.background = background
        self.body = b""
        self.extra_headers = dict(headers or {})
        self.trace_context = trace_context
        self._carrier: dict[str, str] = current_carrier() if trace_context else {}
        self.raw_headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in {**_NO_BUFFERING, **self.extra_headers}.items()
        ]

    def _start_headers(self, jsonl: bool, resumed: str | None) -> list[tuple[bytes, bytes]]:
        headers = [h for h in self.raw_headers if h[0] != b"content-type"]
        media = (JSONL_MEDIA_TYPE if jsonl else f"{SSE_MEDIA_TYPE}; charset=utf-8").encode()
        headers.append((b"content-type", media))
        if resumed is not None:
            headers.append((RESUMED_HEADER.encode(), resumed.encode("latin-1")))
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.trace_context and not self._carrier:
            self._carrier = current_carrier()
        jsonl = self.format == "jsonl" or (
            self.format == "auto" and _wants_jsonl(_header(scope, b"accept") or "")
        )
        last_id = _header(scope, b"last-event-id")
        replay = self.replay if not jsonl else None
        if replay is not None and last_id:
            found = await replay.resume(last_id)
            if isinstance(found, str):
                await self._refuse(send, f"cannot resume the stream: {found}")
            else:
                try:
                    await self._serve(found, jsonl, receive, send, resumed=last_id)
                finally:
                    with anyio.CancelScope(shield=True):
                        await found.aclose()
        else:
            await self._run(replay, jsonl, receive, send)
        if self.background is not None:
            await self.background()

    async def _refuse(
        self, send: Send, text: str, status: int = 410, retry_after: int | None = None
    ) -> None:
        body = f"{text}\n".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
        ]
        if retry_after is not None:
            headers.append((b"retry-after", str(retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _run(self, replay: Replay | None, jsonl: bool, receive: Receive, send: Send) -> None:
        opened: AbstractAsyncContextManager[ReplayLog]
        if replay is None:
            key = "" if jsonl else uuid.uuid4().hex
            opened = contextlib.nullcontext(BufferedStream(key, self.buffer, ring=False))
        else:
            opened = replay.open()
        async with contextlib.AsyncExitStack() as stack:
            try:
                log = await stack.enter_async_context(opened)
            except ReplayFull as full:
                logger.warning("a request is refused (503): %s", full)
                text = f"the server is busy: {full}; retry after {full.retry_after} s"
                await self._refuse(send, text, 503, full.retry_after)
                return
            await self._stream(log, replay, jsonl, receive, send)

    async def _stream(
        self, log: ReplayLog, replay: Replay | None, jsonl: bool, receive: Receive, send: Send
    ) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._produce, log, jsonl)
            reader = log.reader()
            try:
                await self._serve(reader, jsonl, receive, send, resumed=None)
            finally:
                with anyio.CancelScope(shield=True):
                    await reader.aclose()
            if replay is not None:
                # Give a reconnection (here or, with a shared store, elsewhere) the store's
                # linger; the run goes on meanwhile.
                await log.linger()
            tg.cancel_scope.cancel()  # nothing left to serve: the pipeline and source close

    def _encode(self, key: str, seq: int, item: Any, jsonl: bool) -> bytes:
        event = item.event if isinstance(item, Update) else item
        if not isinstance(event, Event):
            raise UsageError(
                "EventStreamResponse writes events (or Updates); a stage gave a "
                f"{type(item).__name__}"
            )
        if self._carrier and isinstance(event, RunStartedEvent):
            event = stamped(event, self._carrier)
        data = encode_event(event)
        if jsonl:
            return encode_jsonl(data)
        return encode_sse(data, id=f"{key}:{seq}")

    async def _produce(self, log: ReplayLog, jsonl: bool) -> None:
        """Run the pipeline into ``log``, numbering the events; end it (not when cancelled)."""
        seq = 0
        complete = True
        try:
            async with wrap(
                self.source, *self.stages, mode=self.mode, on_report=self.on_report
            ) as events:
                async for batch in events.batches():
                    frames = []
                    for item in batch:
                        frames.append((seq, self._encode(log.key, seq, item, jsonl)))
                        seq += 1
                    await log.append(frames)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            logger.exception("the event source of an EventStreamResponse failed")
            message = (
                str(exc) if isinstance(exc, (AguiMetaError, DataError)) else type(exc).__name__
            )
            error = RunErrorEvent(message=f"the agent failed: {message}", code="server_error")
            try:
                await log.append([(seq, self._encode(log.key, seq, error, jsonl))])
            except anyio.get_cancelled_exc_class():
                raise
            except Exception:
                logger.exception("an EventStreamResponse could not keep its RUN_ERROR event")
                complete = False
        await log.end(complete=complete)

    async def _serve(
        self,
        reader: ReplayReader,
        jsonl: bool,
        receive: Receive,
        send: Send,
        *,
        resumed: str | None,
    ) -> None:
        """Send what ``reader`` reads until the stream ends or the client disconnects."""
        keepalive = b"\n" if jsonl else b": keepalive\n\n"
        interval = math.inf if self.keepalive is None else self.keepalive
        async with anyio.create_task_group() as tg:

            async def disconnected() -> None:
                while True:
                    message: Message = await receive()
                    if message["type"] == "http.disconnect":
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(disconnected)
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status_code,
                        "headers": self._start_headers(jsonl, resumed),
                    }
                )
                if self.replay is not None and not jsonl:
                    await send(
                        {
                            "type": "http.response.body",
                            "body": f"retry: {self.retry}\n\n".encode(),
                            "more_body": True,
                        }
                    )
                while True:
                    try:
                        frames = await reader.read(interval)
                    except StreamLost as lost:
                        logger.warning("a resumed stream ends with an error: %s", lost)
                        error = RunErrorEvent(message=str(lost), code="stream_lost")
                        data = encode_event(error)
                        body = encode_jsonl(data) if jsonl else encode_sse(data)
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                        break
                    if frames is None:
                        break
                    body = b"".join(frames) if frames else keepalive
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client went away while we were sending
            tg.cancel_scope.cancel()
