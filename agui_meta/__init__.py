"""agui-meta: consume AG-UI 1.0 event streams, with every item's metadata merged to the letter.

The top level holds the pipeline (:func:`wrap`, the stages, the store, the ledger, the errors);
the wire model (the 31 events and the objects they carry) is :mod:`agui_meta.events`, and the
byte layer under it :mod:`agui_meta.framing`.
"""

from __future__ import annotations

import typing as _typing

from . import events as events
from . import framing as framing
from ._accumulate import Accumulate as Accumulate
from ._accumulate import Update as Update
from ._agui_core import from_agui_core as from_agui_core
from ._agui_core import to_agui_core as to_agui_core
from ._budget import Budget as Budget
from ._chunks import ExpandChunks as ExpandChunks
from ._client import AgentRun as AgentRun
from ._client import HttpAgent as HttpAgent
from ._client import RunResult as RunResult
from ._decode import MAX_NESTING as MAX_NESTING
from ._decode import Enforce as Enforce
from ._decode import EventDecoder as EventDecoder
from ._defaults import DefaultStages as DefaultStages
from ._exceptions import AguiMetaError as AguiMetaError
from ._exceptions import AguiWarning as AguiWarning
from ._exceptions import ApplyError as ApplyError
from ._exceptions import ChunkError as ChunkError
from ._exceptions import DataError as DataError
from ._exceptions import DecodeError as DecodeError
from ._exceptions import FramingError as FramingError
from ._exceptions import HttpStatusError as HttpStatusError
from ._exceptions import IncompleteStream as IncompleteStream
from ._exceptions import MetadataError as MetadataError
from ._exceptions import PipelineClosed as PipelineClosed
from ._exceptions import PipelineConsumed as PipelineConsumed
from ._exceptions import PriceTableError as PriceTableError
from ._exceptions import ReplayFull as ReplayFull
from ._exceptions import Report as Report
from ._exceptions import ResponseError as ResponseError
from ._exceptions import RunFailed as RunFailed
from ._exceptions import StreamLost as StreamLost
from ._exceptions import StrictError as StrictError
from ._exceptions import ToolRoundsExceeded as ToolRoundsExceeded
from ._exceptions import UsageError as UsageError
from ._exceptions import VerifyError as VerifyError
from ._interrupts import build_resume_array as build_resume_array
from ._interrupts import is_interrupt_expired as is_interrupt_expired
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
from ._ledger import ToolCallRecord as ToolCallRecord
from ._lint import LintMetadataKeys as LintMetadataKeys
from ._metadata import AGUI_METADATA_KEY as AGUI_METADATA_KEY
from ._metadata import MergedMetadata as MergedMetadata
from ._metadata import iter_metadata as iter_metadata
from ._metadata import merge_metadata as merge_metadata
from ._metadata import unprefixed_keys as unprefixed_keys
from ._metadata import vendor_keys as vendor_keys
from ._middleware import Agent as Agent
from ._middleware import FilterToolCalls as FilterToolCalls
from ._middleware import Middleware as Middleware
from ._middleware import middleware as middleware
from ._otel import otel as otel
from ._pipeline import Pipeline as Pipeline
from ._pipeline import Stage as Stage
from ._pipeline import wrap as wrap
from ._prices import Price as Price
from ._prices import PriceTable as PriceTable
from ._public import public_module as _public_module
from ._replay import Replay as Replay
from ._replay import ReplayLog as ReplayLog
from ._replay import ReplayReader as ReplayReader
from ._resume import ReplayBuffer as ReplayBuffer
from ._runners import compact_events as compact_events
from ._runners import run_sync as run_sync
from ._runners import transduce as transduce
from ._stage import Context as Context
from ._stage import Mode as Mode
from ._stage import Transducer as Transducer
from ._store import ItemStore as ItemStore
from ._store import MessageItem as MessageItem
from ._store import Store as Store
from ._store import ToolCallItem as ToolCallItem
from ._tokens import Usage as Usage
from ._tokens import aggregate_token_usage as aggregate_token_usage
from ._tools import ClientTool as ClientTool
from ._usage import CostTotals as CostTotals
from ._usage import RunUsage as RunUsage
from ._usage import UsageMeter as UsageMeter
from ._usage import UsageSnapshot as UsageSnapshot
from ._verify import OpenItems as OpenItems
from ._verify import Verify as Verify
from ._version import __version__ as __version__

__all__ = (
    "AGUI_METADATA_KEY",
    "MAX_NESTING",
    "Accumulate",
    "Agent",
    "AgentRun",
    "AguiMetaError",
    "AguiWarning",
    "ApplyError",
    "Budget",
    "ChunkError",
    "ClientTool",
    "Context",
    "CostTotals",
    "CustomRecord",
    "DataError",
    "DecodeError",
    "DefaultStages",
    "Enforce",
    "EventDecoder",
    "EventStreamResponse",
    "ExpandChunks",
    "FilterToolCalls",
    "FramingError",
    "HttpAgent",
    "HttpStatusError",
    "IncompleteStream",
    "ItemStore",
    "Ledger",
    "LedgerSnapshot",
    "LintMetadataKeys",
    "MergedMetadata",
    "MessageItem",
    "MetadataError",
    "Middleware",
    "Mode",
    "OpenItems",
    "Pipeline",
    "PipelineClosed",
    "PipelineConsumed",
    "Price",
    "PriceTable",
    "PriceTableError",
    "RawRecord",
    "Replay",
    "ReplayBuffer",
    "ReplayFull",
    "ReplayLog",
    "ReplayReader",
    "Report",
    "ResponseError",
    "RunCancelled",
    "RunFailed",
    "RunInterrupted",
    "RunOutcome",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "RunSuccess",
    "RunUsage",
    "Stage",
    "StepRecord",
    "Store",
    "StreamLost",
    "StrictError",
    "SubagentRecord",
    "ToolCallItem",
    "ToolCallRecord",
    "ToolRoundsExceeded",
    "Transducer",
    "Update",
    "Usage",
    "UsageError",
    "UsageMeter",
    "UsageSnapshot",
    "Verify",
    "VerifyError",
    "aggregate_token_usage",
    "build_resume_array",
    "compact_events",
    "from_agui_core",
    "is_interrupt_expired",
    "iter_metadata",
    "merge_metadata",
    "middleware",
    "otel",
    "run_sync",
    "to_agui_core",
    "transduce",
    "unprefixed_keys",
    "vendor_keys",
    "wrap",
)

if _typing.TYPE_CHECKING:
    from ._server import EventStreamResponse as EventStreamResponse

#: Public names imported on first use (they need an optional dependency).
_LAZY = ("EventStreamResponse",)

_public_module(__name__, globals(), [name for name in __all__ if name not in _LAZY])


def __getattr__(name: str) -> object:
    # EventStreamResponse is a Starlette Response: imported on first use, so that agui-meta
    # itself does not need Starlette (pip install 'agui-meta[server]').
    if name == "EventStreamResponse":
        from ._server import EventStreamResponse

        _public_module(__name__, {name: EventStreamResponse}, [name])
        globals()[name] = EventStreamResponse
        return EventStreamResponse
    raise AttributeError(f"module 'agui_meta' has no attribute {name!r}")
