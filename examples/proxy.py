"""A FastAPI proxy in front of an upstream AG-UI agent: stamp, redact, filter, record.

    pip install 'agui-meta[httpx,server]' fastapi uvicorn
    python examples/server.py --port 8001 &                          # any AG-UI agent
    python examples/proxy.py --upstream http://127.0.0.1:8001/agent --port 8000
    agui-meta run http://127.0.0.1:8000/agent -m "Weather in Lisbon?"
    curl -s http://127.0.0.1:8000/usage

``POST /agent`` forwards the client's RunAgentInput to the upstream agent unchanged and
streams the upstream's events back through agui-meta stages, as SSE (or JSON lines when the
client asks for them), with event ids and keepalives:

- ``ExpandChunks()`` first, so that the stages after it see START/CONTENT/END only;
- ``Stamp``: adds ``gateway.via`` to the metadata of every message and tool call START, which
  the client merges into the item (vendor-prefixed, as the specification asks);
- ``Redact``: replaces secret words in text deltas with ``[redacted]``, also when a word is
  split across deltas (the tail of a delta that could start a secret is held back until the
  next delta or the END), and counts them in ``gateway.redactions`` on the END event;
- ``FilterToolCalls(disallowed=...)``: the tool calls the gateway does not let through
  (the official client's ``FilterToolCallsMiddleware``);
- ``Verify()`` then ``Ledger(on_run=...)``: each run's outcome and token usage, served by
  ``GET /usage``.

When the browser disconnects, the stream to the upstream agent is closed too.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import msgspec
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

import agui_meta
from agui_meta.events import (
    Event,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallStartEvent,
)

log = logging.getLogger("agui-meta.proxy")


def _report(report: agui_meta.Report) -> None:
    """What the stages report (a filtered tool call, a stripped field): logged, not raised."""
    log.info("%s", report)


class Stamp(agui_meta.Transducer[Event, Event]):
    """Adds ``gateway.via`` to the metadata of message and tool call STARTs."""

    def __init__(self, via: str) -> None:
        self.extra = agui_meta.vendor_keys("gateway", via=via)

    def feed(self, event: Event) -> None:
        if isinstance(event, (TextMessageStartEvent, ToolCallStartEvent)):
            metadata = agui_meta.merge_metadata(event.metadata, self.extra)
            event = msgspec.structs.replace(event, metadata=metadata)
        self.emit(event)


class Redact(agui_meta.Transducer[Event, Event]):
    """Replaces secret words in text messages, across delta boundaries.

    Per open message, the end of the text seen so far that could be the start of a secret is
    held back; it is released with the next delta, or before the END, so no secret ever goes
    out in two halves.
    """

    def __init__(self, secrets: Iterable[str], mask: str = "[redacted]") -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self.mask = mask
        self.held: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def _scrub(self, message_id: str, text: str) -> tuple[str, str]:
        """``text`` scrubbed, split into what can go out now and what is held back."""
        count = 0
        for secret in self.secrets:
            count += text.count(secret)
            text = text.replace(secret, self.mask)
        if count:
            self.counts[message_id] = self.counts.get(message_id, 0) + count
        keep = 0
        for secret in self.secrets:
            for n in range(min(len(secret) - 1, len(text)), keep, -1):
                if text.endswith(secret[:n]):
                    keep = n
                    break
        return (text[: len(text) - keep], text[len(text) - keep :]) if keep else (text, "")

    def feed(self, event: Event) -> None:
        if isinstance(event, TextMessageContentEvent):
            out, held = self._scrub(
                event.message_id, self.held.pop(event.message_id, "") + event.delta
            )
            if held:
                self.held[event.message_id] = held
            self.emit(msgspec.structs.replace(event, delta=out))
        elif isinstance(event, TextMessageEndEvent):
            rest = self.held.pop(event.message_id, "")
            if rest:
                self.emit(TextMessageContentEvent(message_id=event.message_id, delta=rest))
            count = self.counts.pop(event.message_id, 0)
            if count:
                extra = agui_meta.vendor_keys("gateway", redactions=count)
                event = msgspec.structs.replace(
                    event, metadata=agui_meta.merge_metadata(event.metadata, extra)
                )
            self.emit(event)
        else:
            self.emit(event)

    def close(self) -> None:
        self.held.clear()  # an unfinished message: what is held back never goes out
        self.counts.clear()


async def upstream_bytes(url: str, body: bytes) -> AsyncIterator[bytes]:
    """The upstream's response body; an error status becomes an exception (a RUN_ERROR)."""
    timeout = httpx.Timeout(10.0, read=300.0)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    async with (
        httpx.AsyncClient(timeout=timeout) as client,
        client.stream("POST", url, content=body, headers=headers) as response,
    ):
        if response.status_code >= 400:
            raise agui_meta.HttpStatusError(response.status_code, await response.aread(), url)
        async for chunk in response.aiter_bytes():
            yield chunk


def create_app(
    upstream: str,
    *,
    secrets: Iterable[str] = ("hunter2",),
    disallowed_tools: Iterable[str] = ("delete_account",),
    via: str = "agui-meta-proxy",
) -> FastAPI:
    """The proxy app for the agent at ``upstream``."""
    app = FastAPI()
    runs: list[agui_meta.RunRecord] = []
    secret_list = list(secrets)
    blocked = list(disallowed_tools)

    @app.post("/agent")
    async def agent(request: Request) -> Response:
        body = await request.body()
        return agui_meta.EventStreamResponse(
            upstream_bytes(upstream, body),
            agui_meta.ExpandChunks(),
            Stamp(via),
            Redact(secret_list),
            agui_meta.FilterToolCalls(disallowed=blocked),
            agui_meta.Verify(),
            agui_meta.Ledger(on_run=runs.append),
            on_report=_report,
        )

    @app.get("/usage")
    async def usage() -> JSONResponse:
        out: list[dict[str, Any]] = [
            {
                "threadId": run.thread_id,
                "runId": run.run_id,
                "status": run.status,
                "usage": msgspec.to_builtins(run.aggregated_usage),
            }
            for run in runs
        ]
        return JSONResponse({"runs": out})

    return app


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the upstream agent's URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(args.upstream), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
