"""AG-UI-style middleware, adapted to pipeline stages, and the tool-call filter.

The TypeScript client's middleware is a function (or a ``Middleware`` subclass) given the run
input and the next agent, returning a new event stream. Here the same shape is::

    async def my_middleware(input: RunAgentInput, next: Agent) -> AsyncIterator[Event]:
        async for event in next.run(input):
            yield event

and :func:`middleware` turns it into a stage for :func:`agui_meta.wrap`, where ``next`` is the
upstream part of the pipeline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol, Union

from ._chunks import ExpandChunks
from ._events import (
    Event,
    RunAgentInput,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    protocol_class,
)
from ._exceptions import UsageError
from ._runners import transduce
from ._stage import Transducer

__all__ = [
    "Agent",
    "FilterToolCalls",
    "FunctionMiddleware",
    "Middleware",
    "middleware",
]


class Agent(Protocol):
    """What a middleware calls to get the rest of the stream: ``next.run(input)``."""

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]: ...


FunctionMiddleware = Callable[[RunAgentInput, Agent], AsyncIterator[Event]]


class Middleware(ABC):
    """Base class for class-style middleware, as the TypeScript client's ``Middleware``."""

    @abstractmethod
    def run(self, input: RunAgentInput, next: Agent) -> AsyncIterator[Event]:
        """Return the event stream this middleware produces from ``next``'s."""

    def run_next(self, input: RunAgentInput, next: Agent) -> AsyncIterator[Event]:
        """``next.run(input)`` with ``*_CHUNK`` events already expanded (the reference's runNext)."""
        return transduce(next.run(input), ExpandChunks())


class _Upstream:
    """The ``next`` agent a middleware sees: the upstream part of the pipeline, single-use."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self._events: AsyncIterator[Event] | None = events

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        if self._events is None:
            raise UsageError(
                "next.run() was called twice: inside a pipeline the upstream stream can be "
                "consumed only once"
            )
        events, self._events = self._events, None
        return events


_BLANK_INPUT = RunAgentInput(thread_id="", run_id="", messages=[])


def middleware(
    mw: Union[Middleware, FunctionMiddleware],
    input: RunAgentInput | None = None,
) -> Callable[[AsyncIterator[Any]], AsyncIterator[Any]]:
    """Adapt an AG-UI-style middleware (function or :class:`Middleware`) into a pipeline stage.

    ``input`` is the run input the middleware is given (a blank one when omitted).

    >>> import anyio, agui_meta
    >>> async def tag(input, next):
    ...     async for event in next.run(input):
    ...         yield event
    >>> async def main():
    ...     events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    ...     async with agui_meta.wrap(events, agui_meta.middleware(tag)) as stream:
    ...         return [e.type async for e in stream]
    >>> anyio.run(main)
    ['RUN_STARTED']
    """
    run = mw.run if isinstance(mw, Middleware) else mw
    run_input = input if input is not None else _BLANK_INPUT

    def stage(upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        return run(run_input, _Upstream(upstream))

    stage.__name__ = f"middleware({getattr(mw, '__name__', type(mw).__name__)})"
    return stage


class FilterToolCalls(Transducer[Event, Event]):
    """Drops the events of blocked tool calls, as the reference's FilterToolCallsMiddleware.

    A TOOL_CALL_START whose name is blocked is dropped and its id remembered; ARGS and END with
    that id are dropped; the first TOOL_CALL_RESULT with that id is dropped and the id
    forgotten. Everything else passes. Unlike the reference, every dropped event is reported
    (code ``"tool-call-filtered"``, severity ``"info"``): nothing is dropped without a report.
    """

    takes_events = True

    def __init__(
        self,
        allowed: Iterable[str] | None = None,
        disallowed: Iterable[str] | None = None,
    ) -> None:
        if allowed is not None and disallowed is not None:
            raise UsageError("Cannot specify both allowed and disallowed tool calls")
        if allowed is None and disallowed is None:
            raise UsageError("Must specify either allowed or disallowed tool calls")
        self._allowed = None if allowed is None else frozenset(allowed)
        self._disallowed = None if disallowed is None else frozenset(disallowed)
        self._blocked: set[str] = set()

    def _is_blocked(self, name: str) -> bool:
        if self._allowed is not None:
            return name not in self._allowed
        assert self._disallowed is not None
        return name in self._disallowed

    def _drop(self, event: Event, tool_call_id: str) -> None:
        self.ctx.report(
            "tool-call-filtered",
            f"dropped {event.type} of filtered tool call {tool_call_id!r}",
            severity="info",
            event_type=event.type,
        )

    def feed(self, item: Event) -> None:
        cls = protocol_class(type(item))
        if cls is ToolCallStartEvent:
            start: ToolCallStartEvent = item  # type: ignore[assignment]
            if self._is_blocked(start.tool_call_name):
                self._blocked.add(start.tool_call_id)
                self._drop(item, start.tool_call_id)
                return
        elif cls is ToolCallArgsEvent or cls is ToolCallEndEvent:
            call_id = item.tool_call_id  # type: ignore[attr-defined]
            if call_id in self._blocked:
                self._drop(item, call_id)
                return
        elif cls is ToolCallResultEvent:
            call_id = item.tool_call_id  # type: ignore[attr-defined]
            if call_id in self._blocked:
                self._blocked.discard(call_id)
                self._drop(item, call_id)
                return
        self.emit(item)
