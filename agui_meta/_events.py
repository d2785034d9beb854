"""The AG-UI 1.0 wire model: the 31 events and every protocol object, as msgspec Structs.

Conventions, the same on every type:

- the wire is camelCase (``message_id`` in Python is ``messageId`` on the wire);
- an absent optional field is :data:`msgspec.UNSET` and is omitted on encode, never written
  as ``null``;
- ``metadata`` is either absent (``UNSET``) or a ``dict``; ``null`` or any other value is a
  decode error;
- events and the objects they carry are immutable (``frozen``);
- unknown properties are not silently ignored: the decoder (see ``_decode``) reports and strips
  them, as the reference client's enforcement stage does.

Values under opaque keys (metadata, state, ``rawEvent``, ``value``, activity content …) are kept
exactly: ``null`` values, unknown keys, nested containers and integers of any size.

``__all__`` is the wire model, listed once: ``agui_meta.events`` re-exports exactly these
(and the codec); helpers such as :func:`protocol_class` are imported by name.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, ClassVar, Literal, Union

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "MESSAGE_TYPES",
    "PATCH_OPS",
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "AgentCapabilities",
    "AnyEvent",
    "AssistantMessage",
    "AudioPart",
    "ContentPart",
    "CustomEvent",
    "DataSource",
    "DeveloperMessage",
    "DocumentPart",
    "Event",
    "ExecutionCapabilities",
    "FileSource",
    "FunctionCall",
    "HumanInTheLoopCapabilities",
    "IdentityCapabilities",
    "ImagePart",
    "InputContext",
    "Interrupt",
    "JsonPatch",
    "JsonValue",
    "Message",
    "MessagesSnapshotEvent",
    "Metadata",
    "MultiAgentCapabilities",
    "MultimodalCapabilities",
    "MultimodalInputCapabilities",
    "MultimodalOutputCapabilities",
    "OutputCapabilities",
    "PartSource",
    "RawEvent",
    "ReasoningCapabilities",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "ResumeEntry",
    "RunAgentInput",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedOutcome",
    "RunFinishedSuccessOutcome",
    "RunStartedEvent",
    "StateCapabilities",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedOutcome",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentInfo",
    "SubagentStartedEvent",
    "SystemMessage",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageStartEvent",
    "TextPart",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "ToolsCapabilities",
    "TransportCapabilities",
    "UrlSource",
    "UserMessage",
    "VideoPart",
]

#: The largest integer a JavaScript number holds exactly (2**53 - 1): the protocol's bound on
#: timestamps and token counts.
MAX_SAFE_INTEGER = 9007199254740991

#: A JSON object under ``metadata``: open by key, any JSON value (``null`` included) under a key.
Metadata = dict[str, Any]
#: Any JSON value except ``null``: the protocol's type for ``rawEvent``, ``result``, tool
#: ``parameters``, resume ``payload``, ``forwardedProps`` and part metadata.
JsonValue = Union[dict[str, Any], list[Any], str, int, float, bool]

_Timestamp = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
_Count = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]

#: A "~" that is not an escape ("~0" or "~1").
_BAD_TILDE = re.compile(r"~(?![01])")
#: RFC 6902 operations and the members each requires (``from``/``path`` are JSON Pointers).
PATCH_OPS: dict[str, tuple[str, ...]] = {
    "add": ("path", "value"),
    "remove": ("path",),
    "replace": ("path", "value"),
    "move": ("from", "path"),
    "copy": ("from", "path"),
    "test": ("path", "value"),
}


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, as msgspec's messages spell it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _check_patch(ops: list[dict[str, Any]], field: str) -> None:
    """Validate RFC 6902 operations in place of a Struct (patch ops are open: extra members stay).

    Error messages end with msgspec's `` - at `$.path` `` so that the decoder reads the path
    the same way as from msgspec's own errors.
    """
    for i, op in enumerate(ops):
        kind = op.get("op")
        required = PATCH_OPS.get(kind) if isinstance(kind, str) else None
        if required is None:
            raise ValueError(f"Invalid JSON Patch operation {kind!r} - at `$.{field}[{i}].op`")
        for name in required:
            if name not in op:
                raise ValueError(f"Object missing required field `{name}` - at `$.{field}[{i}]`")
            if name != "value":
                pointer = op[name]
                if not isinstance(pointer, str):
                    raise ValueError(
                        f"Expected `str`, got `{_json_type(pointer)}` - at `$.{field}[{i}].{name}`"
                    )
                # A pointer is "" or starts with "/", and each "~" in it is "~0" or "~1".
                if (pointer and pointer[0] != "/") or (
                    "~" in pointer and _BAD_TILDE.search(pointer)
                ):
                    raise ValueError(
                        f"Invalid JSON Pointer {pointer!r} - at `$.{field}[{i}].{name}`"
                    )


#: A JSON Patch document (RFC 6902). The operations stay plain dicts: the RFC keeps them open
#: (members an operation does not define are kept), so they cannot be closed Structs. The
#: ``extra`` marker tells the decoder's schema walker to treat them as patch operations.
JsonPatch = Annotated[list[dict[str, Any]], Meta(extra={"agui": "json-patch"})]


class _Wire(
    msgspec.Struct,
    kw_only=True,
    frozen=True,
    rename="camel",
    omit_defaults=True,
    forbid_unknown_fields=True,
    gc=False,
):
    """Shared configuration of every protocol object.

    ``gc=False``: the cyclic garbage collector does not track them. A protocol object holds
    JSON values only, which cannot refer back to it, so it is never part of a cycle; the
    collector then neither counts the events of a stream in flight nor walks those a
    long-lived pipeline holds (thousands of concurrent streams make its passes dear).
    """


# ---------------------------------------------------------------------------------------------
# Content parts and their sources


class _Source(_Wire, tag_field="type", kw_only=True, frozen=True):
    pass


class DataSource(_Source, tag="data", kw_only=True, frozen=True):
    """Bytes carried inline (base64 or similar) with their MIME type."""

    value: str
    mime_type: str


class UrlSource(_Source, tag="url", kw_only=True, frozen=True):
    """Content reachable at a URL."""

    value: str
    mime_type: str | UnsetType = UNSET


class FileSource(_Source, tag="file", kw_only=True, frozen=True):
    """A file known to a provider (an uploaded file id)."""

    value: str
    provider: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET


PartSource = Union[DataSource, UrlSource, FileSource]


class _Part(_Wire, tag_field="type", kw_only=True, frozen=True):
    id: str | UnsetType = UNSET
    metadata: JsonValue | UnsetType = UNSET


class TextPart(_Part, tag="text", kw_only=True, frozen=True):
    """A text content part. Its ``metadata`` is any non-null JSON value (not a Metadata object)."""

    text: str


class ImagePart(_Part, tag="image", kw_only=True, frozen=True):
    """An image content part."""

    source: PartSource


class AudioPart(_Part, tag="audio", kw_only=True, frozen=True):
    """An audio content part."""

    source: PartSource


class VideoPart(_Part, tag="video", kw_only=True, frozen=True):
    """A video content part."""

    source: PartSource


class DocumentPart(_Part, tag="document", kw_only=True, frozen=True):
    """A document content part."""

    source: PartSource


ContentPart = Union[TextPart, ImagePart, AudioPart, VideoPart, DocumentPart]


# ---------------------------------------------------------------------------------------------
# Tool calls, tools, interrupts, resume entries, run input, usage


class FunctionCall(_Wire, kw_only=True, frozen=True):
    """The function a tool call invokes, with its arguments as a JSON string."""

    name: str
    arguments: str


class ToolCall(_Wire, kw_only=True, frozen=True):
    """One tool call of an assistant message.

    ``type`` is always ``"function"`` and is required on the wire, so it is required here too:
    build one with ``ToolCall(id=..., type="function", function=FunctionCall(...))``. (A msgspec
    tag would have a default, and a Struct reached outside a union does not require its tag
    when decoding: a tool call without ``type`` would decode, where the protocol rejects it.)
    """

    id: str
    type: Literal["function"]
    function: FunctionCall
    encrypted_value: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class Tool(_Wire, kw_only=True, frozen=True):
    """A tool offered to the agent in a run's input."""

    name: str
    description: str
    parameters: JsonValue | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class InputContext(_Wire, kw_only=True, frozen=True):
    """A piece of context offered to the agent in a run's input.

    ``Context`` in ``ag_ui.core``; renamed so as not to clash with the pipeline's
    :class:`~agui_meta.Context`.
    """

    description: str
    value: str


class Interrupt(_Wire, kw_only=True, frozen=True):
    """A question the run leaves open for the user (in an ``interrupt`` outcome)."""

    id: str
    reason: str
    message: str | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    response_schema: dict[str, Any] | UnsetType = UNSET
    expires_at: str | UnsetType = UNSET
    subagent_run_id: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class ResumeEntry(_Wire, kw_only=True, frozen=True):
    """The answer to an interrupt, sent back in a run's input."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: JsonValue | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class TokenUsage(_Wire, kw_only=True, frozen=True):
    """Token counts reported by a provider; every count is a non-negative safe integer."""

    provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    input_tokens: _Count | UnsetType = UNSET
    output_tokens: _Count | UnsetType = UNSET
    total_tokens: _Count | UnsetType = UNSET
    reasoning_tokens: _Count | UnsetType = UNSET
    cached_input_tokens: _Count | UnsetType = UNSET
    cache_write_input_tokens: _Count | UnsetType = UNSET


# ---------------------------------------------------------------------------------------------
# Messages


class _Message(_Wire, tag_field="role", kw_only=True, frozen=True):
    """Base of the 7 message roles. ``message.role`` is the wire tag (``"assistant"`` …)."""

    role: ClassVar[str]
    id: str
    subagent_run_id: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class DeveloperMessage(_Message, tag="developer", kw_only=True, frozen=True):
    """A developer message."""

    role: ClassVar[str] = "developer"

    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class SystemMessage(_Message, tag="system", kw_only=True, frozen=True):
    """A system message."""

    role: ClassVar[str] = "system"

    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class AssistantMessage(_Message, tag="assistant", kw_only=True, frozen=True):
    """An assistant message: optional text content and optional tool calls."""

    role: ClassVar[str] = "assistant"

    content: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class UserMessage(_Message, tag="user", kw_only=True, frozen=True):
    """A user message: text or content parts."""

    role: ClassVar[str] = "user"

    content: str | list[ContentPart]
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ToolMessage(_Message, tag="tool", kw_only=True, frozen=True):
    """The result of a tool call."""

    role: ClassVar[str] = "tool"

    content: str | list[ContentPart]
    tool_call_id: str
    error: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ActivityMessage(_Message, tag="activity", kw_only=True, frozen=True):
    """A structured activity (a progress card, a plan …) whose content is a JSON object."""

    role: ClassVar[str] = "activity"

    activity_type: str
    content: dict[str, Any]


class ReasoningMessage(_Message, tag="reasoning", kw_only=True, frozen=True):
    """A reasoning (thinking) message."""

    role: ClassVar[str] = "reasoning"

    content: str
    encrypted_value: str | UnsetType = UNSET


Message = Union[
    DeveloperMessage,
    SystemMessage,
    AssistantMessage,
    UserMessage,
    ToolMessage,
    ActivityMessage,
    ReasoningMessage,
]

#: The 7 message classes by their wire ``role``.
MESSAGE_TYPES: dict[str, type[Message]] = {cls.role: cls for cls in typing.get_args(Message)}


class RunAgentInput(_Wire, kw_only=True, frozen=True):
    """The input of a run (as echoed by ``RUN_STARTED.input``). A ``null`` state reads as absent."""

    thread_id: str
    run_id: str
    messages: list[Message]
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    state: Any = UNSET
    tools: list[Tool] | UnsetType = UNSET
    context: list[InputContext] | UnsetType = UNSET
    forwarded_props: JsonValue | UnsetType = UNSET
    resume: list[ResumeEntry] | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.state is None:
            msgspec.structs.force_setattr(self, "state", UNSET)


# ---------------------------------------------------------------------------------------------
# Agent capabilities (what an agent declares about itself; every member optional)


class _Capabilities(_Wire, kw_only=True, frozen=True):
    """Base of the capability objects: an omitted member is undeclared (UNSET), not
    unsupported."""


class SubagentInfo(_Capabilities, kw_only=True, frozen=True):
    """A subagent a parent agent can invoke."""

    name: str
    description: str | UnsetType = UNSET


class IdentityCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Who the agent is: for discovery UIs and agent selectors."""

    name: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    version: str | UnsetType = UNSET
    provider: str | UnsetType = UNSET
    documentation_url: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class TransportCapabilities(_Capabilities, kw_only=True, frozen=True):
    """The transports the agent handles."""

    streaming: bool | UnsetType = UNSET
    websocket: bool | UnsetType = UNSET
    http_binary: bool | UnsetType = UNSET
    push_notifications: bool | UnsetType = UNSET
    resumable: bool | UnsetType = UNSET


class ToolsCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Tool calling: the agent's own tools (``items``) and whether it takes the client's."""

    supported: bool | UnsetType = UNSET
    items: list[Tool] | UnsetType = UNSET
    parallel_calls: bool | UnsetType = UNSET
    client_provided: bool | UnsetType = UNSET


class OutputCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Output formats: structured output, MIME types."""

    structured_output: bool | UnsetType = UNSET
    supported_mime_types: list[str] | UnsetType = UNSET


class StateCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Shared state and memory."""

    snapshots: bool | UnsetType = UNSET
    deltas: bool | UnsetType = UNSET
    memory: bool | UnsetType = UNSET
    persistent_state: bool | UnsetType = UNSET


class MultiAgentCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Multi-agent coordination: delegation, handoffs, subagents."""

    supported: bool | UnsetType = UNSET
    delegation: bool | UnsetType = UNSET
    handoffs: bool | UnsetType = UNSET
    subagents: list[SubagentInfo] | UnsetType = UNSET


class ReasoningCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Reasoning shown to the client."""

    supported: bool | UnsetType = UNSET
    streaming: bool | UnsetType = UNSET
    encrypted: bool | UnsetType = UNSET


class MultimodalInputCapabilities(_Capabilities, kw_only=True, frozen=True):
    """The modalities the agent accepts."""

    image: bool | UnsetType = UNSET
    audio: bool | UnsetType = UNSET
    video: bool | UnsetType = UNSET
    pdf: bool | UnsetType = UNSET
    file: bool | UnsetType = UNSET


class MultimodalOutputCapabilities(_Capabilities, kw_only=True, frozen=True):
    """The modalities the agent produces."""

    image: bool | UnsetType = UNSET
    audio: bool | UnsetType = UNSET


class MultimodalCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Multimodal input and output."""

    input: MultimodalInputCapabilities | UnsetType = UNSET
    output: MultimodalOutputCapabilities | UnsetType = UNSET


class ExecutionCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Code execution and limits (``max_execution_time`` in milliseconds)."""

    code_execution: bool | UnsetType = UNSET
    sandboxed: bool | UnsetType = UNSET
    max_iterations: _Count | UnsetType = UNSET
    max_execution_time: _Count | UnsetType = UNSET


class HumanInTheLoopCapabilities(_Capabilities, kw_only=True, frozen=True):
    """Human-in-the-loop: approvals, interventions, feedback, interrupts."""

    supported: bool | UnsetType = UNSET
    approvals: bool | UnsetType = UNSET
    interventions: bool | UnsetType = UNSET
    feedback: bool | UnsetType = UNSET
    interrupts: bool | UnsetType = UNSET
    approve_with_edits: bool | UnsetType = UNSET


class AgentCapabilities(_Capabilities, kw_only=True, frozen=True):
    """What an agent declares it supports, by category (the official ``AgentCapabilities``);
    ``custom`` holds integration-specific capabilities (a JSON object)."""

    identity: IdentityCapabilities | UnsetType = UNSET
    transport: TransportCapabilities | UnsetType = UNSET
    tools: ToolsCapabilities | UnsetType = UNSET
    output: OutputCapabilities | UnsetType = UNSET
    state: StateCapabilities | UnsetType = UNSET
    multi_agent: MultiAgentCapabilities | UnsetType = UNSET
    reasoning: ReasoningCapabilities | UnsetType = UNSET
    multimodal: MultimodalCapabilities | UnsetType = UNSET
    execution: ExecutionCapabilities | UnsetType = UNSET
    human_in_the_loop: HumanInTheLoopCapabilities | UnsetType = UNSET
    custom: Metadata | UnsetType = UNSET


# ---------------------------------------------------------------------------------------------
# Run outcomes


class _Outcome(_Wire, tag_field="type", kw_only=True, frozen=True):
    pass


class RunFinishedSuccessOutcome(_Outcome, tag="success", kw_only=True, frozen=True):
    """The run succeeded; ``pending_tool_call_ids`` lists calls left for the client to answer."""

    pending_tool_call_ids: list[str] | UnsetType = UNSET


class RunFinishedInterruptOutcome(_Outcome, tag="interrupt", kw_only=True, frozen=True):
    """The run stopped on one or more interrupts."""

    interrupts: Annotated[list[Interrupt], Meta(min_length=1)]


class RunFinishedCancelledOutcome(_Outcome, tag="cancelled", kw_only=True, frozen=True):
    """The run was cancelled."""


RunFinishedOutcome = Union[
    RunFinishedSuccessOutcome, RunFinishedInterruptOutcome, RunFinishedCancelledOutcome
]


class SubagentFinishedSuccessOutcome(_Outcome, tag="success", kw_only=True, frozen=True):
    """The subagent succeeded."""


class SubagentFinishedSuspendedOutcome(_Outcome, tag="suspended", kw_only=True, frozen=True):
    """The subagent is suspended on interrupts."""

    interrupt_ids: list[str] | UnsetType = UNSET


SubagentFinishedOutcome = Union[SubagentFinishedSuccessOutcome, SubagentFinishedSuspendedOutcome]


# ---------------------------------------------------------------------------------------------
# Events


class Event(_Wire, tag_field="type", kw_only=True, frozen=True):
    """Base of the 31 AG-UI 1.0 events. ``event.type`` is the wire tag (``"TEXT_MESSAGE_START"``)."""

    type: ClassVar[str]
    timestamp: _Timestamp | UnsetType = UNSET
    raw_event: JsonValue | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class _Attributable(Event, kw_only=True, frozen=True):
    """An event that may be attributed to a subagent run."""

    subagent_run_id: str | UnsetType = UNSET


class TextMessageStartEvent(_Attributable, tag="TEXT_MESSAGE_START", kw_only=True, frozen=True):
    """Opens a streamed text message (``role`` defaults to assistant when absent)."""

    type: ClassVar[str] = "TEXT_MESSAGE_START"
    message_id: str
    role: Literal["developer", "system", "assistant", "user"] | UnsetType = UNSET
    name: str | UnsetType = UNSET


class TextMessageContentEvent(_Attributable, tag="TEXT_MESSAGE_CONTENT", kw_only=True, frozen=True):
    """Appends a fragment to a streamed text message."""

    type: ClassVar[str] = "TEXT_MESSAGE_CONTENT"
    message_id: str
    delta: str


class TextMessageEndEvent(_Attributable, tag="TEXT_MESSAGE_END", kw_only=True, frozen=True):
    """Closes a streamed text message."""

    type: ClassVar[str] = "TEXT_MESSAGE_END"
    message_id: str


class TextMessageChunkEvent(_Attributable, tag="TEXT_MESSAGE_CHUNK", kw_only=True, frozen=True):
    """Shorthand for start/content/end; expanded by :class:`agui_meta.ExpandChunks`."""

    type: ClassVar[str] = "TEXT_MESSAGE_CHUNK"
    message_id: str | UnsetType = UNSET
    role: Literal["developer", "system", "assistant", "user"] | UnsetType = UNSET
    delta: str | UnsetType = UNSET
    name: str | UnsetType = UNSET


class ToolCallStartEvent(_Attributable, tag="TOOL_CALL_START", kw_only=True, frozen=True):
    """Opens a tool call."""

    type: ClassVar[str] = "TOOL_CALL_START"
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | UnsetType = UNSET


class ToolCallArgsEvent(_Attributable, tag="TOOL_CALL_ARGS", kw_only=True, frozen=True):
    """Appends a fragment of a tool call's arguments."""

    type: ClassVar[str] = "TOOL_CALL_ARGS"
    tool_call_id: str
    delta: str


class ToolCallEndEvent(_Attributable, tag="TOOL_CALL_END", kw_only=True, frozen=True):
    """Closes a tool call."""

    type: ClassVar[str] = "TOOL_CALL_END"
    tool_call_id: str


class ToolCallChunkEvent(_Attributable, tag="TOOL_CALL_CHUNK", kw_only=True, frozen=True):
    """Shorthand for a tool call's start/args/end; expanded by :class:`agui_meta.ExpandChunks`."""

    type: ClassVar[str] = "TOOL_CALL_CHUNK"
    tool_call_id: str | UnsetType = UNSET
    tool_call_name: str | UnsetType = UNSET
    parent_message_id: str | UnsetType = UNSET
    delta: str | UnsetType = UNSET


class ToolCallResultEvent(_Attributable, tag="TOOL_CALL_RESULT", kw_only=True, frozen=True):
    """The result of a tool call; creates a tool message."""

    type: ClassVar[str] = "TOOL_CALL_RESULT"
    message_id: str
    tool_call_id: str
    content: str | list[ContentPart]
    role: Literal["tool"] | UnsetType = UNSET


class StateSnapshotEvent(_Attributable, tag="STATE_SNAPSHOT", kw_only=True, frozen=True):
    """Replaces the shared state (``snapshot`` may be any JSON value, ``null`` included)."""

    type: ClassVar[str] = "STATE_SNAPSHOT"
    snapshot: Any


class StateDeltaEvent(_Attributable, tag="STATE_DELTA", kw_only=True, frozen=True):
    """Patches the shared state with RFC 6902 operations (kept as dicts: they are open)."""

    type: ClassVar[str] = "STATE_DELTA"
    delta: JsonPatch

    def __post_init__(self) -> None:
        _check_patch(self.delta, "delta")


class MessagesSnapshotEvent(Event, tag="MESSAGES_SNAPSHOT", kw_only=True, frozen=True):
    """The authoritative message list, merged into the client's."""

    type: ClassVar[str] = "MESSAGES_SNAPSHOT"
    messages: list[Message]


class ActivitySnapshotEvent(_Attributable, tag="ACTIVITY_SNAPSHOT", kw_only=True, frozen=True):
    """Creates or replaces an activity message (``replace`` defaults to true when absent)."""

    type: ClassVar[str] = "ACTIVITY_SNAPSHOT"
    message_id: str
    activity_type: str
    content: dict[str, Any]
    replace: bool | UnsetType = UNSET


class ActivityDeltaEvent(_Attributable, tag="ACTIVITY_DELTA", kw_only=True, frozen=True):
    """Patches an activity message's content with RFC 6902 operations."""

    type: ClassVar[str] = "ACTIVITY_DELTA"
    message_id: str
    activity_type: str
    patch: JsonPatch

    def __post_init__(self) -> None:
        _check_patch(self.patch, "patch")


class RawEvent(_Attributable, tag="RAW", kw_only=True, frozen=True):
    """An event from an underlying system, passed through (``event`` may be ``null``)."""

    type: ClassVar[str] = "RAW"
    event: Any
    source: str | UnsetType = UNSET


class CustomEvent(_Attributable, tag="CUSTOM", kw_only=True, frozen=True):
    """An application-defined event (``value`` may be ``null``)."""

    type: ClassVar[str] = "CUSTOM"
    name: str
    value: Any


class RunStartedEvent(Event, tag="RUN_STARTED", kw_only=True, frozen=True):
    """A run starts; ``input`` may echo the run's input messages."""

    type: ClassVar[str] = "RUN_STARTED"
    thread_id: str
    run_id: str
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    input: RunAgentInput | UnsetType = UNSET


class RunFinishedEvent(Event, tag="RUN_FINISHED", kw_only=True, frozen=True):
    """A run finished; an absent ``outcome`` means success."""

    type: ClassVar[str] = "RUN_FINISHED"
    thread_id: str
    run_id: str
    result: JsonValue | UnsetType = UNSET
    outcome: RunFinishedOutcome | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class RunErrorEvent(Event, tag="RUN_ERROR", kw_only=True, frozen=True):
    """A run failed."""

    type: ClassVar[str] = "RUN_ERROR"
    message: str
    code: str | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class StepStartedEvent(_Attributable, tag="STEP_STARTED", kw_only=True, frozen=True):
    """A named step starts."""

    type: ClassVar[str] = "STEP_STARTED"
    step_name: str


class StepFinishedEvent(_Attributable, tag="STEP_FINISHED", kw_only=True, frozen=True):
    """A named step finishes."""

    type: ClassVar[str] = "STEP_FINISHED"
    step_name: str


class ReasoningStartEvent(_Attributable, tag="REASONING_START", kw_only=True, frozen=True):
    """A reasoning span starts (it creates no message)."""

    type: ClassVar[str] = "REASONING_START"
    message_id: str


class ReasoningMessageStartEvent(
    _Attributable, tag="REASONING_MESSAGE_START", kw_only=True, frozen=True
):
    """Opens a reasoning message (``role`` is required and is always ``"reasoning"``)."""

    type: ClassVar[str] = "REASONING_MESSAGE_START"
    message_id: str
    role: Literal["reasoning"]


class ReasoningMessageContentEvent(
    _Attributable, tag="REASONING_MESSAGE_CONTENT", kw_only=True, frozen=True
):
    """Appends a fragment to a reasoning message."""

    type: ClassVar[str] = "REASONING_MESSAGE_CONTENT"
    message_id: str
    delta: str


class ReasoningMessageEndEvent(
    _Attributable, tag="REASONING_MESSAGE_END", kw_only=True, frozen=True
):
    """Closes a reasoning message."""

    type: ClassVar[str] = "REASONING_MESSAGE_END"
    message_id: str


class ReasoningMessageChunkEvent(
    _Attributable, tag="REASONING_MESSAGE_CHUNK", kw_only=True, frozen=True
):
    """Shorthand for a reasoning message's start/content/end."""

    type: ClassVar[str] = "REASONING_MESSAGE_CHUNK"
    message_id: str | UnsetType = UNSET
    delta: str | UnsetType = UNSET


class ReasoningEndEvent(_Attributable, tag="REASONING_END", kw_only=True, frozen=True):
    """A reasoning span ends."""

    type: ClassVar[str] = "REASONING_END"
    message_id: str


class ReasoningEncryptedValueEvent(
    _Attributable, tag="REASONING_ENCRYPTED_VALUE", kw_only=True, frozen=True
):
    """Attaches an encrypted reasoning value to a message or a tool call."""

    type: ClassVar[str] = "REASONING_ENCRYPTED_VALUE"
    subtype: Literal["tool-call", "message"]
    entity_id: str
    encrypted_value: str


class SubagentStartedEvent(Event, tag="SUBAGENT_STARTED", kw_only=True, frozen=True):
    """A subagent invocation starts (``subagent_run_id`` identifies it)."""

    type: ClassVar[str] = "SUBAGENT_STARTED"
    subagent_run_id: str
    name: str
    description: str | UnsetType = UNSET
    parent_subagent_run_id: str | UnsetType = UNSET
    parent_tool_call_id: str | UnsetType = UNSET
    parent_message_id: str | UnsetType = UNSET


class SubagentFinishedEvent(Event, tag="SUBAGENT_FINISHED", kw_only=True, frozen=True):
    """A subagent invocation finished; an absent ``outcome`` means success."""

    type: ClassVar[str] = "SUBAGENT_FINISHED"
    subagent_run_id: str
    result: JsonValue | UnsetType = UNSET
    outcome: SubagentFinishedOutcome | UnsetType = UNSET


class SubagentErrorEvent(Event, tag="SUBAGENT_ERROR", kw_only=True, frozen=True):
    """A subagent invocation failed."""

    type: ClassVar[str] = "SUBAGENT_ERROR"
    subagent_run_id: str
    message: str
    code: str | UnsetType = UNSET


AnyEvent = Union[
    TextMessageStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageChunkEvent,
    ToolCallStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    StateSnapshotEvent,
    StateDeltaEvent,
    MessagesSnapshotEvent,
    ActivitySnapshotEvent,
    ActivityDeltaEvent,
    RawEvent,
    CustomEvent,
    RunStartedEvent,
    RunFinishedEvent,
    RunErrorEvent,
    StepStartedEvent,
    StepFinishedEvent,
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningEndEvent,
    ReasoningEncryptedValueEvent,
    SubagentStartedEvent,
    SubagentFinishedEvent,
    SubagentErrorEvent,
]

#: The 31 event classes of AG-UI 1.0 by their wire ``type``.
EVENT_TYPES: dict[str, type[Event]] = {cls.type: cls for cls in typing.get_args(AnyEvent)}

_PROTOCOL_CLASSES: dict[type, type[Event]] = {cls: cls for cls in EVENT_TYPES.values()}


def protocol_class(cls: type) -> type[Event] | None:
    """The AG-UI 1.0 event class ``cls`` is or subclasses (``None`` for anything else).

    Stages dispatch on it, so an application's subclass of an event class (a
    ``TextMessageStartEvent`` with helpers of its own, say) is handled as the event it is.
    """
    found = _PROTOCOL_CLASSES.get(cls)
    if found is None and isinstance(cls, type) and issubclass(cls, Event):
        for base in cls.__mro__:
            found = _PROTOCOL_CLASSES.get(base)
            if found is not None:
                _PROTOCOL_CLASSES[cls] = found
                break
    return found
