"""Client-side tools: Python functions an :class:`~agui_meta.HttpAgent` declares and runs itself.

AG-UI's frontend tools are declared by the client in ``RunAgentInput.tools``, called by the
agent (a tool call the run leaves pending) and answered by the client with a ``tool`` message
in the next run. :class:`ClientTool` wraps a Python function (sync or async) as such a tool:
its JSON schema is derived from the function's type hints (a msgspec Struct built from the
signature, through :func:`msgspec.json.schema`) or given, and :func:`call_tools` runs the
calls a run left pending — concurrently, each bounded by a timeout — turning each into a
:class:`ToolResult`. Arguments that are not JSON or do not match the signature, an exception
and a timeout all become error results the agent can read; only cancellation (and other
``BaseException`` s) go through.
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from ._events import Tool
from ._exceptions import UsageError

__all__ = [
    "ClientTool",
    "ToolResult",  # internal: HttpAgent.call_tools() returns the messages
    "call_tools",
    "client_tools",
    "tool_name",
]

#: The longest one tool call may take by default, in seconds.
DEFAULT_TOOL_TIMEOUT = 60.0


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one tool call, as appended to the thread.

    - ``tool_call_id``, ``tool_name``: the call answered;
    - ``message_id``: the id of the ``tool`` message appended;
    - ``content``: the message's content (a ``str`` return value as it is, any other value as
      JSON; for an error, the error's text);
    - ``error``: ``None`` on success, else what went wrong (also the message's ``error``
      member): arguments that are not JSON or do not match the tool's parameters, an
      exception the function raised, a timeout.
    """

    tool_call_id: str
    tool_name: str
    message_id: str
    content: str
    error: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The ``tool`` message (wire JSON)."""
        message: dict[str, Any] = {
            "id": self.message_id,
            "role": "tool",
            "toolCallId": self.tool_call_id,
            "content": self.content,
        }
        if self.error is not None:
            message["error"] = self.error
        return message


def _summary(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    if not doc:
        return ""
    first = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(first.split())


class ClientTool:
    """A tool the client declares in its runs and executes when the agent calls it.

    :param function: the tool's function, sync or async, called with the call's arguments as
        keyword arguments (a sync function runs in a worker thread). Its parameters are read
        from its signature and type hints: each becomes a member of the arguments object,
        required unless it has a default.
    :param name: the tool's name (the function's ``__name__`` by default).
    :param description: what the tool does, for the model (the docstring's first paragraph
        by default).
    :param parameters: the JSON schema declared (by default derived from the signature with
        :func:`msgspec.json.schema`). Arguments are checked against the signature either way.
    :param timeout: the longest one call may take, in seconds (``None``: the agent's
        ``tool_timeout``).

    >>> from agui_meta import ClientTool
    >>> def show_weather(city: str, unit: str = "C") -> str:
    ...     '''Show the weather on the user's screen.'''
    ...     return f"shown for {city}"
    >>> ClientTool(show_weather).declaration()["parameters"]["required"]
    ['city']
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> None:
        if not callable(function):
            raise UsageError(f"a client tool needs a function, got {function!r}")
        if timeout is not None and not timeout > 0:
            raise UsageError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.function = function
        self.name: str = name if name is not None else getattr(function, "__name__", "")
        if not self.name or self.name == "<lambda>":
            raise UsageError(f"client tool {function!r} needs a name: ClientTool(f, name=...)")
        documented = function.func if isinstance(function, functools.partial) else function
        self.description = (
            description if description is not None else _summary(inspect.getdoc(documented))
        )
        self.timeout = timeout
        self._is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - a callable object's own method
        )
        self._arguments, self._var_keyword = self._signature(function)
        self.parameters: dict[str, Any] = (
            dict(parameters) if parameters is not None else self._schema()
        )

    def _signature(self, function: Callable[..., Any]) -> tuple[type[msgspec.Struct], bool]:
        # A callable object's parameters and hints are its __call__'s.
        plain = inspect.isroutine(function) or isinstance(function, functools.partial)
        target = function if plain else type(function).__call__
        try:
            signature = inspect.signature(function)
            hints = typing.get_type_hints(
                target.func if isinstance(target, functools.partial) else target,
                include_extras=True,
            )
        except (TypeError, ValueError, NameError) as exc:
            raise UsageError(
                f"client tool {self.name!r}: cannot read its signature: {exc}"
            ) from exc
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        var_keyword = False
        for parameter in signature.parameters.values():
            kind = parameter.kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                var_keyword = True
                continue
            if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
                raise UsageError(
                    f"client tool {self.name!r}: parameter {parameter.name!r} cannot be passed "
                    "by name (the arguments of a tool call are a JSON object)"
                )
            annotation = hints.get(parameter.name, Any)
            if parameter.default is inspect.Parameter.empty:
                fields.append((parameter.name, annotation))
            else:
                fields.append((parameter.name, annotation, parameter.default))
        try:
            struct = msgspec.defstruct(
                f"{self.name}_arguments",
                fields,
                kw_only=True,
                forbid_unknown_fields=not var_keyword,
            )
            msgspec.json.Decoder(struct)  # the types must be ones msgspec can decode
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"client tool {self.name!r}: its parameters cannot be decoded from JSON: {exc}"
            ) from exc
        return struct, var_keyword

    def _schema(self) -> dict[str, Any]:
        struct = self._arguments
        try:
            (_,), components = msgspec.json.schema_components(
                [struct], ref_template="#/$defs/{name}"
            )
        except (TypeError, ValueError) as exc:  # pragma: no cover - the decoder accepted them
            raise UsageError(f"client tool {self.name!r}: no JSON schema: {exc}") from exc
        schema = dict(components.pop(struct.__name__))
        schema.pop("title", None)
        schema.setdefault("properties", {})
        if self._var_keyword:
            schema.pop("additionalProperties", None)
        else:
            schema["additionalProperties"] = False
        if components:
            schema["$defs"] = components
        return schema

    def declaration(self) -> dict[str, Any]:
        """The tool as declared in ``RunAgentInput.tools`` (wire JSON)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def _decode(self, arguments: str | None) -> dict[str, Any]:
        """The keyword arguments of a call; raises ``_BadArguments`` saying what is wrong."""
        text = arguments or "{}"
        try:
            value = msgspec.json.decode(text, type=self._arguments)
        except msgspec.ValidationError as exc:
            raise _BadArguments(f"the arguments do not match its parameters: {exc}") from None
        except msgspec.DecodeError as exc:
            raise _BadArguments(f"the arguments are not valid JSON ({exc})") from None
        kwargs = msgspec.structs.asdict(value)
        if self._var_keyword:
            extra = msgspec.json.decode(text)
            if isinstance(extra, dict):
                for key, item in extra.items():
                    kwargs.setdefault(key, item)
        return kwargs

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        if self._is_async:
            return await self.function(**kwargs)
        # A thread cannot be interrupted: on timeout or cancellation it is abandoned (its
        # result dropped) and the call answered at once.
        return await anyio.to_thread.run_sync(
            lambda: self.function(**kwargs), abandon_on_cancel=True
        )

    def __repr__(self) -> str:
        return f"ClientTool({self.name!r})"


class _BadArguments(Exception):
    pass


def tool_name(declaration: Mapping[str, Any] | Tool) -> Any:
    """The name of a wire tool declaration (a dict or a :class:`~agui_meta.events.Tool`)."""
    return declaration.name if isinstance(declaration, Tool) else declaration.get("name")


def client_tools(tools: Iterable[Any]) -> tuple[dict[str, ClientTool], list[Any]]:
    """Split ``HttpAgent(tools=...)``: functions and :class:`ClientTool` objects (executed by
    the client, by name) and wire declarations (dicts or :class:`~agui_meta.events.Tool`,
    only declared). Returns the executed tools by name and every declaration, in order.

    :raises UsageError: two tools with one name, or something that is neither.
    """
    executed: dict[str, ClientTool] = {}
    declared: list[Any] = []
    names: set[str] = set()
    for tool in tools:
        if isinstance(tool, ClientTool):
            pass
        elif isinstance(tool, (Mapping, Tool)):
            name = tool_name(tool)
            if name in names:
                raise UsageError(f"tools=: two tools are named {name!r}")
            names.add(name)
            declared.append(tool)
            continue
        elif callable(tool):
            tool = ClientTool(tool)
        else:
            raise UsageError(
                "tools= takes functions, ClientTool objects and tool "
                f"declarations (dicts or agui_meta.events.Tool), got {tool!r}"
            )
        if tool.name in names:
            raise UsageError(f"tools=: two tools are named {tool.name!r}")
        names.add(tool.name)
        executed[tool.name] = tool
        declared.append(tool.declaration())
    return executed, declared


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


async def _answer(
    tool: ClientTool | None,
    name: str,
    call_id: str,
    arguments: str | None,
    message_id: str,
    limit_s: float,
    limiter: anyio.CapacityLimiter,
    results: list[ToolResult | None],
    index: int,
) -> None:
    def failed(error: str) -> None:
        text = f"tool {name!r}: {error}"
        results[index] = ToolResult(
            tool_call_id=call_id, tool_name=name, message_id=message_id, content=text, error=text
        )

    if tool is None:  # pragma: no cover - call_tools passes only known tools
        failed("no such client tool")
        return
    try:
        kwargs = tool._decode(arguments)
    except _BadArguments as exc:
        failed(str(exc))
        return
    limit = tool.timeout if tool.timeout is not None else limit_s
    async with limiter:
        with anyio.move_on_after(limit) as scope:
            try:
                value = await tool._invoke(kwargs)
            except Exception as exc:  # noqa: BLE001 - the agent reads it as an error result
                failed(f"raised {type(exc).__name__}: {exc}")
                return
    if scope.cancelled_caught:
        failed(f"timed out after {limit:g} s")
        return
    try:
        content = _content(value)
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        failed(f"returned a value that cannot be encoded as JSON ({exc})")
        return
    results[index] = ToolResult(
        tool_call_id=call_id, tool_name=name, message_id=message_id, content=content
    )


async def call_tools(
    tools: Mapping[str, ClientTool],
    calls: Sequence[tuple[str, str, str | None, str]],
    *,
    timeout_s: float = DEFAULT_TOOL_TIMEOUT,
    concurrency: int = 8,
    max_calls: int = 32,
) -> list[ToolResult]:
    """Run tool calls ``(call id, tool name, arguments JSON, result message id)`` concurrently
    (at most ``concurrency`` at once, each within its timeout) and return their results in
    the calls' order. Every call gets a result: the calls past the first ``max_calls`` are
    refused (an error result each, nothing run), so that an agent calling a tool thousands of
    times costs a bounded time. Cancellation goes through (no result then)."""
    if not (timeout_s > 0 and not math.isnan(timeout_s)):
        raise UsageError(f"tool_timeout must be > 0 seconds, got {timeout_s!r}")
    results: list[ToolResult | None] = [None] * len(calls)
    for index in range(max_calls, len(calls)):
        call_id, name, _, message_id = calls[index]
        text = (
            f"tool {name!r}: not run: the run made {len(calls)} calls to client tools, more "
            f"than the client runs for one run (max_tool_calls={max_calls})"
        )
        results[index] = ToolResult(
            tool_call_id=call_id, tool_name=name, message_id=message_id, content=text, error=text
        )
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    async with anyio.create_task_group() as group:
        for index, (call_id, name, arguments, message_id) in enumerate(calls[:max_calls]):
            group.start_soon(
                _answer,
                tools.get(name),
                name,
                call_id,
                arguments,
                message_id,
                timeout_s,
                limiter,
                results,
                index,
            )
    done = [r for r in results if r is not None]
    assert len(done) == len(calls)
    return done
