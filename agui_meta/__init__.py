"""agui-meta: consume AG-UI 1.0 event streams, with every item's metadata merged to the letter."""

from __future__ import annotations

from ._accumulate import Accumulate as Accumulate
from ._accumulate import Update as Update
from ._accumulate import accumulate as accumulate
from ._agui_core import from_agui_core as from_agui_core
from ._agui_core import to_agui_core as to_agui_core
from ._chunks import ExpandChunks as ExpandChunks
from ._chunks import expand_chunks as expand_chunks
from ._compact import compact_events as compact_events
from ._decode import MAX_NESTING as MAX_NESTING
from ._decode import Enforce as Enforce
from ._decode import EventDecoder as EventDecoder
from ._decode import decode_event as decode_event
from ._decode import decode_message as decode_message
from ._decode import encode_event as encode_event
from ._decode import enforce as enforce
from ._defaults import DefaultStages as DefaultStages
from ._defaults import default_stages as default_stages
from ._events import EVENT_TYPES as EVENT_TYPES
from ._events import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
from ._events import PATCH_OPS as PATCH_OPS
from ._events import ActivityDeltaEvent as ActivityDeltaEvent
from ._events import ActivityMessage as ActivityMessage
from ._events import ActivitySnapshotEvent as ActivitySnapshotEvent
from ._events import AnyEvent as AnyEvent
from ._events import AssistantMessage as AssistantMessage
from ._events import AudioPart as AudioPart
from ._events import ContentPart as ContentPart
from ._events import CustomEvent as CustomEvent
from ._events import DataSource as DataSource
from ._events import DeveloperMessage as DeveloperMessage
from ._events import DocumentPart as DocumentPart
from ._events import Event as Event
from ._events import FileSource as FileSource
from ._events import FunctionCall as FunctionCall
from ._events import ImagePart as ImagePart
from ._events import InputContext as InputContext
from ._events import Interrupt as Interrupt
from ._events import JsonPatch as JsonPatch
from ._events import JsonValue as JsonValue
from ._events import Message as Message
from ._events import MessagesSnapshotEvent as MessagesSnapshotEvent
from ._events import Metadata as Metadata
from ._events import PartSource as PartSource
from ._events import RawEvent as RawEvent
from ._events import ReasoningEncryptedValueEvent as ReasoningEncryptedValueEvent
from ._events import ReasoningEndEvent as ReasoningEndEvent
from ._events import ReasoningMessage as ReasoningMessage
from ._events import ReasoningMessageChunkEvent as ReasoningMessageChunkEvent
from ._events import ReasoningMessageContentEvent as ReasoningMessageContentEvent
from ._events import ReasoningMessageEndEvent as ReasoningMessageEndEvent
from ._events import ReasoningMessageStartEvent as ReasoningMessageStartEvent
from ._events import ReasoningStartEvent as ReasoningStartEvent
from ._events import ResumeEntry as ResumeEntry
from ._events import RunAgentInput as RunAgentInput
from ._events import RunErrorEvent as RunErrorEvent
from ._events import RunFinishedCancelledOutcome as RunFinishedCancelledOutcome
from ._events import RunFinishedEvent as RunFinishedEvent
from ._events import RunFinishedInterruptOutcome as RunFinishedInterruptOutcome
from ._events import RunFinishedOutcome as RunFinishedOutcome
from ._events import RunFinishedSuccessOutcome as RunFinishedSuccessOutcome
from ._events import RunStartedEvent as RunStartedEvent
from ._events import StateDeltaEvent as StateDeltaEvent
from ._events import StateSnapshotEvent as StateSnapshotEvent
from ._events import StepFinishedEvent as StepFinishedEvent
from ._events import StepStartedEvent as StepStartedEvent
from ._events import SubagentErrorEvent as SubagentErrorEvent
from ._events import SubagentFinishedEvent as SubagentFinishedEvent
from ._events import SubagentFinishedOutcome as SubagentFinishedOutcome
from ._events import SubagentFinishedSuccessOutcome as SubagentFinishedSuccessOutcome
from ._events import SubagentFinishedSuspendedOutcome as SubagentFinishedSuspendedOutcome
from ._events import SubagentStartedEvent as SubagentStartedEvent
from ._events import SystemMessage as SystemMessage
from ._events import TextMessageChunkEvent as TextMessageChunkEvent
from ._events import TextMessageContentEvent as TextMessageContentEvent
from ._events import TextMessageEndEvent as TextMessageEndEvent
from ._events import TextMessageStartEvent as TextMessageStartEvent
from ._events import TextPart as TextPart
from ._events import TokenUsage as TokenUsage
from ._events import Tool as Tool
from ._events import ToolCall as ToolCall
from ._events import ToolCallArgsEvent as ToolCallArgsEvent
from ._events import ToolCallChunkEvent as ToolCallChunkEvent
from ._events import ToolCallEndEvent as ToolCallEndEvent
from ._events import ToolCallResultEvent as ToolCallResultEvent
from ._events import ToolCallStartEvent as ToolCallStartEvent
from ._events import ToolMessage as ToolMessage
from ._events import UrlSource as UrlSource
from ._events import UserMessage as UserMessage
from ._events import VideoPart as VideoPart
from ._exceptions import AguiMetaError as AguiMetaError
from ._exceptions import AguiWarning as AguiWarning
from ._exceptions import ApplyError as ApplyError
from ._exceptions import ChunkError as ChunkError
from ._exceptions import DataError as DataError
from ._exceptions import DecodeError as DecodeError
from ._exceptions import FramingError as FramingError
from ._exceptions import MetadataError as MetadataError
from ._exceptions import PipelineClosed as PipelineClosed
from ._exceptions import PipelineConsumed as PipelineConsumed
from ._exceptions import Report as Report
from ._exceptions import StrictError as StrictError
from ._exceptions import UsageError as UsageError
from ._exceptions import VerifyError as VerifyError
from ._framing import Frame as Frame
from ._framing import JsonLinesDecoder as JsonLinesDecoder
from ._framing import SSEDecoder as SSEDecoder
from ._framing import aiter_file_frames as aiter_file_frames
from ._framing import aiter_frames as aiter_frames
from ._framing import aiter_httpx_frames as aiter_httpx_frames
from ._framing import detect_format as detect_format
from ._framing import encode_jsonl as encode_jsonl
from ._framing import encode_sse as encode_sse
from ._ledger import CustomRecord as CustomRecord
from ._ledger import Ledger as Ledger
from ._ledger import LedgerSnapshot as LedgerSnapshot
from ._ledger import RawRecord as RawRecord
from ._ledger import RunCancelled as RunCancelled
from ._ledger import RunInterrupted as RunInterrupted
from ._ledger import RunOutcome as RunOutcome
from ._ledger import RunRecord as RunRecord
from ._ledger import RunStatus as RunStatus
from ._ledger import RunSuccess as RunSuccess
from ._ledger import StepRecord as StepRecord
from ._ledger import SubagentRecord as SubagentRecord
from ._ledger import aggregate_token_usage as aggregate_token_usage
from ._ledger import ledger as ledger
from ._lint import LintMetadataKeys as LintMetadataKeys
from ._lint import lint_metadata as lint_metadata
from ._metadata import AGUI_METADATA_KEY as AGUI_METADATA_KEY
from ._metadata import iter_metadata as iter_metadata
from ._metadata import merge_metadata as merge_metadata
from ._metadata import unprefixed_keys as unprefixed_keys
from ._metadata import vendor_keys as vendor_keys
from ._middleware import Agent as Agent
from ._middleware import FilterToolCalls as FilterToolCalls
from ._middleware import Middleware as Middleware
from ._middleware import filter_tool_calls as filter_tool_calls
from ._middleware import middleware as middleware
from ._middleware import transduce as transduce
from ._pipeline import Pipeline as Pipeline
from ._pipeline import Stage as Stage
from ._pipeline import wrap as wrap
from ._stage import Context as Context
from ._stage import Mode as Mode
from ._stage import Transducer as Transducer
from ._stage import run_sync as run_sync
from ._store import ItemStore as ItemStore
from ._store import MessageItem as MessageItem
from ._store import Store as Store
from ._store import ToolCallItem as ToolCallItem
from ._verify import OpenItems as OpenItems
from ._verify import Verify as Verify
from ._verify import verify as verify

__all__ = (
    "AGUI_METADATA_KEY",
    "EVENT_TYPES",
    "MAX_NESTING",
    "MAX_SAFE_INTEGER",
    "PATCH_OPS",
    "Accumulate",
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "Agent",
    "AguiMetaError",
    "AguiWarning",
    "AnyEvent",
    "ApplyError",
    "AssistantMessage",
    "AudioPart",
    "ChunkError",
    "ContentPart",
    "Context",
    "CustomEvent",
    "CustomRecord",
    "DataError",
    "DataSource",
    "DecodeError",
    "DefaultStages",
    "DeveloperMessage",
    "DocumentPart",
    "Enforce",
    "Event",
    "EventDecoder",
    "ExpandChunks",
    "FileSource",
    "FilterToolCalls",
    "Frame",
    "FramingError",
    "FunctionCall",
    "ImagePart",
    "InputContext",
    "Interrupt",
    "ItemStore",
    "JsonLinesDecoder",
    "JsonPatch",
    "JsonValue",
    "Ledger",
    "LedgerSnapshot",
    "LintMetadataKeys",
    "Message",
    "MessageItem",
    "MessagesSnapshotEvent",
    "Metadata",
    "MetadataError",
    "Middleware",
    "Mode",
    "OpenItems",
    "PartSource",
    "Pipeline",
    "PipelineClosed",
    "PipelineConsumed",
    "RawEvent",
    "RawRecord",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "Report",
    "ResumeEntry",
    "RunAgentInput",
    "RunCancelled",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedOutcome",
    "RunFinishedSuccessOutcome",
    "RunInterrupted",
    "RunOutcome",
    "RunRecord",
    "RunStartedEvent",
    "RunStatus",
    "RunSuccess",
    "SSEDecoder",
    "Stage",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepRecord",
    "StepStartedEvent",
    "Store",
    "StrictError",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedOutcome",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentRecord",
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
    "ToolCallItem",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "Transducer",
    "Update",
    "UrlSource",
    "UsageError",
    "UserMessage",
    "Verify",
    "VerifyError",
    "VideoPart",
    "accumulate",
    "aggregate_token_usage",
    "aiter_file_frames",
    "aiter_frames",
    "aiter_httpx_frames",
    "compact_events",
    "decode_event",
    "decode_message",
    "default_stages",
    "detect_format",
    "encode_event",
    "encode_jsonl",
    "encode_sse",
    "enforce",
    "expand_chunks",
    "filter_tool_calls",
    "from_agui_core",
    "iter_metadata",
    "ledger",
    "lint_metadata",
    "merge_metadata",
    "middleware",
    "run_sync",
    "to_agui_core",
    "transduce",
    "unprefixed_keys",
    "vendor_keys",
    "verify",
    "wrap",
)
