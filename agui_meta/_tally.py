"""The run's tool-call tally (``pendingToolCallIds``), in bounded memory.

The reference derives the pending tool calls of a run as the ids TOOL_CALL_START opened in the
run that no TOOL_CALL_RESULT of the run answered, first start first. Kept naively (every id
started, every id answered) that costs memory for every call of the run, answered or not.
:class:`ToolCallTally` keeps what the rule still needs, with a limit on each part:

- ``pending``: the ids started and not answered yet, in order of first start. A call that is
  answered leaves it. Past ``limit`` pending ids, a newly started id is not tracked (counted
  in ``refused``): the pending list then lists the first ``limit`` only;
- ``answered``: the ids answered in the run, so that a later TOOL_CALL_START of one of them
  does not make it pending (a closed call may be opened again, and a result may come before
  its start). Past ``limit`` of them, the oldest is forgotten (counted in ``forgotten``): a
  later start of a forgotten id makes it pending, where the reference would not.

Both stay exact up to the limit; each operation costs O(1). ``limit=None`` bounds nothing.
Used by :class:`~agui_meta.Store` and :class:`~agui_meta.Ledger`, each with its own limit.
"""

from __future__ import annotations

from collections import OrderedDict

from ._exceptions import UsageError
from ._speedups import new_ordered

__all__ = ["ToolCallTally"]


class ToolCallTally:
    """The pending tool calls of one run (see the module documentation)."""

    __slots__ = ("_answered", "_pending", "forgotten", "limit", "refused")

    def __init__(self, limit: int | None = 10_000) -> None:
        if limit is not None and limit < 0:
            raise UsageError(f"the tool-call limit must be >= 0 or None, got {limit}")
        self.limit = limit
        self._pending: dict[str, None] = {}
        self._answered: OrderedDict[str, None] = new_ordered()  # oldest first
        #: Started ids not tracked because ``limit`` ids were pending (this run).
        self.refused = 0
        #: Answered ids forgotten, oldest first, to keep at most ``limit`` (this run).
        self.forgotten = 0

    def reset(self) -> None:
        """A run starts: the tally restarts."""
        self._pending = {}
        self._answered = new_ordered()
        self.refused = 0
        self.forgotten = 0

    def start(self, tool_call_id: str) -> bool:
        """Record a TOOL_CALL_START; false when the id could not be tracked (``refused``)."""
        if tool_call_id in self._pending or tool_call_id in self._answered:
            return True
        if self.limit is not None and len(self._pending) >= self.limit:
            self.refused += 1
            return False
        self._pending[tool_call_id] = None
        return True

    def answer(self, tool_call_id: str) -> bool:
        """Record a TOOL_CALL_RESULT; false when an older answered id had to be forgotten."""
        self._pending.pop(tool_call_id, None)
        answered = self._answered
        if tool_call_id in answered:
            return True
        answered[tool_call_id] = None
        if self.limit is not None and len(answered) > self.limit:
            answered.popitem(last=False)
            self.forgotten += 1
            return False
        return True

    def pending(self) -> list[str]:
        """The ids started and not answered in this run, first start first."""
        return list(self._pending)

    def is_pending(self, tool_call_id: str) -> bool:
        """Whether the id is among :meth:`pending`."""
        return tool_call_id in self._pending
