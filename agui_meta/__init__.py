"""agui-meta: consume AG-UI 1.0 event streams, with every item's metadata merged to the letter."""

from __future__ import annotations

from ._chunks import ExpandChunks as ExpandChunks
from ._chunks import expand_chunks as expand_chunks
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
from ._accumulate import Accumulate as Accumulate
from ._accumulate import Update as Update
from ._accumulate import accumulate as accumulate
from ._store import ItemStore as ItemStore
from ._store import MessageItem as MessageItem
from ._store import Store as Store
from ._store import ToolCallItem as ToolCallItem
from ._verify import OpenItems as OpenItems
from ._verify import Verify as Verify
from ._verify import verify as verify
