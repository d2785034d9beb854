"""The agents a gateway fronts: a Python callable, an ASGI app, or an upstream URL.

Each is turned into a :class:`GatewayAgent`: ``await agent(input, emit)`` runs the agent on a
:class:`~agui_meta.events.RunAgentInput` and hands each thing it produces to ``emit`` (events
as dicts, agui-meta events, ``ag_ui.core`` models, or chunks of an SSE / JSON-lines body:
whatever :func:`agui_meta.wrap` decodes). Cancelling the call stops the agent.

- a callable ``agent(input)`` returning an async iterator (an async generator function), or an
  awaitable of one;
- :class:`AsgiAgent`: an ASGI app that serves AG-UI (pydantic-ai's ``to_ag_ui()``, a Starlette
  or FastAPI endpoint), called in this process, with no socket: the request is POSTed to
  ``path`` and the body's chunks are passed on as the app sends them;
- :class:`UpstreamAgent`: the URL of an AG-UI endpoint, POSTed to with httpx.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import Any, Protocol, Union, cast

import anyio
import msgspec

from ._events import RunAgentInput
from ._exceptions import AgentError, UsageError
from ._framing import aiter_body

__all__ = ["AsgiAgent", "GatewayAgent", "UpstreamAgent", "as_agent"]

Emit = Callable[[Any], Awaitable[None]]
AgentCallable = Callable[[RunAgentInput], Union[AsyncIterable[Any], Awaitable[AsyncIterable[Any]]]]

_PREVIEW = 512


class GatewayAgent(Protocol):
    async def __call__(self, input: RunAgentInput, emit: Emit) -> None: ...


def _request_body(input: RunAgentInput) -> bytes:
    return msgspec.json.encode(input)


class CallableAgent:
    """An async callable (``async def agent(input): yield event``) as a :class:`GatewayAgent`."""

    def __init__(self, fn: AgentCallable) -> None:
        self.fn = fn

    async def __call__(self, input: RunAgentInput, emit: Emit) -> None:
        produced = self.fn(input)
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, AsyncIterable):
            raise AgentError(
                f"the agent {self.fn!r} returned {type(produced).__name__}, "
                "not an async iterator of events"
            )
        iterator = aiter(produced)
        try:
            async for item in iterator:
                await emit(item)
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()


class AsgiAgent:
    """An ASGI app serving AG-UI at ``path``, called in this process (no socket, no server).

    >>> from agui_meta.gateway import AsgiAgent
    >>> AsgiAgent(lambda scope, receive, send: None, path="/agent").path
    '/agent'
    """

    def __init__(
        self, app: Any, *, path: str = "/", headers: Mapping[str, str] | None = None
    ) -> None:
        if not path.startswith("/"):
            raise UsageError(f"path must start with '/', got {path!r}")
        self.app = app
        self.path = path
        self.headers = dict(headers or {})

    async def __call__(self, input: RunAgentInput, emit: Emit) -> None:
        body = _request_body(input)
        headers = {
            **{k.lower(): v for k, v in self.headers.items()},
            "content-type": "application/json",
            "accept": "text/event-stream",
            "content-length": str(len(body)),
        }
        path, _, query = self.path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": query.encode(),
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
            "client": ("127.0.0.1", 0),
            "server": ("agui-meta-gateway", 80),
            "state": {},
        }
        sent_body = False
        status = 0
        preview = b""
        never = anyio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await never.wait()  # the client stays; cancelling the call is the disconnect
            return {"type": "http.disconnect"}  # pragma: no cover

        async def send(message: Mapping[str, Any]) -> None:
            nonlocal status, preview
            kind = message["type"]
            if kind == "http.response.start":
                status = int(message["status"])
            elif kind == "http.response.body":
                chunk = bytes(message.get("body", b""))
                if status >= 400:
                    preview = (preview + chunk)[:_PREVIEW]
                elif chunk:
                    await emit(chunk)

        await self.app(scope, receive, send)
        if status == 0:
            raise AgentError(f"the ASGI app at {self.path} returned without a response")
        if status >= 400:
            text = preview.decode("utf-8", "replace").strip()
            raise AgentError(f"the ASGI app at {self.path} answered HTTP {status}: {text}")


class UpstreamAgent:
    """An AG-UI endpoint at ``url`` (POST, SSE or JSON lines), through httpx."""

    def __init__(
        self, url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 300.0
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"an upstream agent's URL starts with http:// or https://: {url!r}")
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout

    async def __call__(self, input: RunAgentInput, emit: Emit) -> None:
        import httpx

        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        timeout = httpx.Timeout(10.0, read=self.timeout)
        # The body is inflated in bounded steps (a small gzip body may inflate to gigabytes).
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream(
                "POST", self.url, content=_request_body(input), headers=headers
            ) as answer,
            contextlib.aclosing(aiter_body(answer)) as chunks,
        ):
            if answer.status_code >= 400:
                preview = b""
                async for chunk in chunks:
                    preview += chunk
                    if len(preview) >= _PREVIEW:
                        break
                text = preview[:_PREVIEW].decode("utf-8", "replace").strip()
                raise AgentError(f"{self.url} answered HTTP {answer.status_code}: {text}")
            async for chunk in chunks:
                await emit(chunk)


def _is_asgi(obj: Any) -> bool:
    """An ASGI app: a callable of three positional parameters (scope, receive, send)."""
    try:
        parameters = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 3


def as_agent(spec: Any) -> GatewayAgent:
    """A :class:`GatewayAgent` for ``spec``: a URL (str), an ASGI app, an async callable of the
    run input, or a :class:`GatewayAgent` already (``AsgiAgent``, ``UpstreamAgent``)."""
    if isinstance(spec, (AsgiAgent, UpstreamAgent, CallableAgent)):
        return spec
    if isinstance(spec, str):
        return UpstreamAgent(spec)
    if not callable(spec):
        raise UsageError(
            f"an agent is an async callable, an ASGI app or a URL, not {type(spec).__name__}"
        )
    if _is_asgi(spec):
        return AsgiAgent(spec)
    return CallableAgent(cast(AgentCallable, spec))
