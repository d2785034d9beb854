"""The run registry contract: what the gateway's routes ask of the runs (no implementation).

The routes of :mod:`agui_meta._gateway` talk to runs only through these protocols, so that the
runs may live in this process (:class:`agui_meta._runs.MemoryRuns`, the embedded default) or
elsewhere — runs dispatched to executors across replicas, their logs in Redis Streams — without
the routes changing. Every method that may need another process is a coroutine.

- :class:`RunHandle`: one run, active or recently ended: its ids, the scope it belongs to, a
  reader of its events (a :class:`~agui_meta._replay.ReplayReader`), the prelude that joins it,
  stop, and waiting for its end (its thread saved).
- :class:`RunRegistry`: the runs: the active one of a thread, a run by its ids or by the key
  of its event ids, starting one (one per thread, at most ``max_runs``), the runs started on a
  thread after a given one (for ``connect`` with ``follow``), and the task group runs live in.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ._events import Message, RunAgentInput
    from ._replay import ReplayReader
    from ._store import Store
    from ._threads import ThreadSnapshot

__all__ = ["RunHandle", "RunRegistry", "StopReason"]

#: Why a run was cut short (the ``RUN_ERROR`` code, or a cancelled ``RUN_FINISHED``).
StopReason = Literal[
    "stopped", "superseded", "abandoned", "run_timeout", "gateway_shutdown", "budget_exceeded"
]


class RunHandle(Protocol):
    """One run, active or recently ended."""

    key: str  # the prefix of its event ids
    thread_id: str
    run_id: str
    scope: str
    agent_name: str

    @property
    def events(self) -> int:
        """How many events the run has written so far."""
        ...

    def reader(self, start: int) -> ReplayReader:
        """Its events from number ``start`` on (a reader of the run until closed)."""
        ...

    async def join(self) -> tuple[list[bytes], ReplayReader]:
        """SSE frames that bring a fresh client to where the run is now, and a reader of the
        events after them."""
        ...

    async def stop(self, reason: StopReason) -> bool:
        """Cancel the agent; the run ends as ``reason`` says. Whether it was still running."""
        ...

    async def wait_ended(self, within: float) -> bool:
        """Wait (at most ``within`` seconds) for the run to end and its thread to be saved."""
        ...


class RunRegistry(Protocol):
    """The runs the gateway serves."""

    max_runs: int

    def running(self) -> AbstractAsyncContextManager[None]:
        """The lifetime of the runs: started inside, stopped (``gateway_shutdown``) and waited
        for on the way out."""
        ...

    async def active(self, thread_id: str) -> RunHandle | None: ...

    async def find(self, thread_id: str, run_id: str) -> RunHandle | None:
        """The run ``run_id`` of ``thread_id``, active or ended while it is still held."""
        ...

    async def by_key(self, key: str) -> RunHandle | None:
        """The run whose event ids start with ``key``, while it is held."""
        ...

    async def check_room(self, thread_id: str) -> None:
        """Raise :class:`ThreadBusy` or :class:`AtCapacity` if a run could not start now."""
        ...

    async def start(
        self,
        *,
        scope: str,
        agent_name: str,
        agent: Any,
        input: RunAgentInput,
        store: Store,
        base: ThreadSnapshot,
        new_messages: list[Message],
    ) -> RunHandle:
        """Start the run (atomically: :class:`ThreadBusy`, :class:`AtCapacity`)."""
        ...

    async def latest(self, thread_id: str) -> tuple[int, RunHandle | None]:
        """The ordinal of the run started last on ``thread_id`` (``0``: none held) and it."""
        ...

    async def wait_started(self, thread_id: str, after: int, within: float) -> None:
        """Return when a run of ordinal above ``after`` started on the thread, when the thread
        was forgotten, or after ``within`` seconds."""
        ...

    async def forget_thread(self, thread_id: str) -> None:
        """The thread was deleted: drop its ended runs."""
        ...

    async def active_runs(self) -> Sequence[RunHandle]: ...
