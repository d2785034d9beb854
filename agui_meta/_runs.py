"""Gateway runs: one agent run detached from the requests that read it, and the registry of runs.

A :class:`Run` belongs to its thread, not to a request. It runs in the gateway's task group:
the agent's output goes through :class:`_Guard` (a ``RUN_STARTED`` first if the agent sends
none; at the end, whatever the run needs to be a complete run) and the default stages
(expand chunks, verify, accumulate into the thread's store, ledger), and each event is
encoded as SSE with the id ``<run key>:<n>`` into the run's :class:`~agui_meta._runlog.RunLog`,
which every connection reads at its own pace. The run never waits for its readers.

How a run ends:

- the agent's stream ends with ``RUN_FINISHED`` or ``RUN_ERROR`` (passed on as sent);
- the agent's stream ends without one: ``RUN_ERROR`` code ``"incomplete"``; the agent raises:
  ``RUN_ERROR`` code ``"agent_error"``;
- :meth:`Run.stop` (the stop route, or a run superseding it): the agent is cancelled, every
  open item is closed (``…_END``, ``STEP_FINISHED``, ``SUBAGENT_ERROR`` code ``cancelled``)
  and the run ends with ``RUN_FINISHED`` outcome ``cancelled``;
- its scope is over the gateway's budget (:class:`~agui_meta.Budget`, checked when the run
  starts, and for the scope's active runs when a run of theirs takes it past a limit): the
  agent is cancelled (or never called), ``RUN_ERROR`` code ``"budget_exceeded"``;
- no reader for ``linger`` seconds: the agent is cancelled, ``RUN_ERROR`` code ``"abandoned"``;
  past ``max_run_time``: ``RUN_ERROR`` code ``"run_timeout"``; the gateway shutting down:
  ``RUN_ERROR`` code ``"gateway_shutdown"``;
- the agent's events break the AG-UI rules (the verifier refuses one): ``RUN_ERROR`` code
  ``"server_error"``, after the events that passed.

Then, whatever the ending, the run's usage is charged to its scope's budget (once, here),
the thread is saved once with compare-and-set, the catalog notes the
run as ended, and :attr:`Run.ended` is set. :class:`MemoryRuns` (the one-process
:class:`~agui_meta._registry.RunRegistry`) holds the runs of the process:
the active one of each thread, and ended ones for a while (``keep`` seconds, at most
``max_kept``), so that a client coming back late still gets the whole run.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET

from ._accumulate import Update
from ._budget import BUDGET_CODE, Budget
from ._decode import encode_event
from ._defaults import DefaultStages
from ._events import (
    Event,
    Message,
    ReasoningEndEvent,
    ReasoningMessageEndEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    SubagentErrorEvent,
    TextMessageEndEvent,
    ToolCallEndEvent,
)
from ._exceptions import AguiMetaError, AtCapacity, DataError, ThreadBusy, UsageError
from ._framing import encode_sse
from ._join import join_prelude, thread_prelude
from ._ledger import Ledger
from ._pipeline import wrap
from ._registry import StopReason
from ._runlog import MemoryRunLog, RunLog
from ._stage import Transducer
from ._store import MessageItem, Store
from ._threads import ThreadSnapshot, ThreadStore, VersionConflict
from ._tracecontext import current_carrier, stamped

if TYPE_CHECKING:
    from ._agents import GatewayAgent
    from ._catalog import Catalog
    from ._registry import RunHandle, RunRegistry
    from ._replay import ReplayReader

__all__ = ["MemoryRuns", "Run", "thread_store"]

logger = logging.getLogger("agui_meta.gateway")

#: How many items the agent may produce ahead of the run's pipeline.
_AHEAD = 64


_ERRORS: dict[str, str] = {
    "abandoned": "the run was cancelled: no client read it for {linger:g} s",
    "run_timeout": "the run was cancelled: it ran longer than {max_run_time:g} s",
    "gateway_shutdown": "the run was cancelled: the gateway shut down",
}


def thread_store(base: ThreadSnapshot, new: Iterable[Mapping[str, Any]]) -> Store:
    """The store a run starts from: thread ``base`` with the ``new`` messages (wire dicts)."""
    store = base.to_store()
    for message in new:
        store.append(MessageItem.from_wire(message))
    return store


class _Guard(Transducer[Event, Event]):
    """First stage of a run: RUN_STARTED first; at the end, whatever completes the run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.started = False
        self.terminal = False

    def feed(self, item: Event) -> None:
        kind = type(item)
        if not self.started:
            self.started = True
            if kind is not RunStartedEvent:
                self.emit(self.run.started_event())
            elif isinstance(item, RunStartedEvent):
                if item.input is UNSET and self.run.new_messages:
                    # The run's new messages, for the clients that did not send them.
                    item = msgspec.structs.replace(item, input=self.run.echoed_input())
                item = stamped(item, self.run.carrier)
        if kind is RunFinishedEvent or kind is RunErrorEvent:
            self.terminal = True
        elif kind is RunStartedEvent:
            self.terminal = False
        self.emit(item)

    def close(self) -> None:
        if self.terminal:
            return
        if not self.started:
            self.started = True
            self.emit(self.run.started_event())
        for event in self.run.closing_events():
            self.emit(event)
        self.terminal = True


class Run:
    """One gateway run: its agent, its thread's store, its log, its readers."""

    def __init__(
        self,
        registry: MemoryRuns,
        *,
        scope: str,
        agent_name: str,
        agent: GatewayAgent,
        input: RunAgentInput,
        store: Store,
        base: ThreadSnapshot,
        new_messages: list[Message] | None = None,
    ) -> None:
        self.registry = registry
        self.key = uuid.uuid4().hex
        self.scope = scope
        self.agent_name = agent_name
        self.agent = agent
        self.input = input
        self.thread_id = input.thread_id
        self.run_id = input.run_id
        self.base = base
        self.new_messages = new_messages or []
        #: The trace context current when the run was asked for (the run request's span),
        #: stamped into RUN_STARTED's metadata under the ``w3c.*`` keys.
        self.carrier = current_carrier()
        self.stages = DefaultStages(store, ledger=Ledger())
        self.log: RunLog = MemoryRunLog(self.key, registry.max_events)
        self.readers = 0
        self.reason: StopReason | None = None
        #: The RUN_ERROR message of a run ended by its scope's budget.
        self.budget_message = ""
        self.failure: BaseException | None = None
        self.agent_scope = anyio.CancelScope(deadline=anyio.current_time() + registry.max_run_time)
        self.ended = anyio.Event()
        self.ended_at: float | None = None
        self._readers_changed = anyio.Event()

    @property
    def store(self) -> Store:
        return self.stages.store

    @property
    def active(self) -> bool:
        return not self.ended.is_set()

    # -- readers -----------------------------------------------------------------------------

    def reader(self, start: int) -> ReplayReader:
        """A reader from event ``start`` on; counted as a reader of the run until closed."""
        return _CountedReader(self, self.log.reader(start))

    def _reader_count(self, delta: int) -> None:
        self.readers += delta
        self._readers_changed.set()
        self._readers_changed = anyio.Event()

    async def join(self) -> tuple[list[bytes], ReplayReader]:
        """The prelude that joins this run now, and a reader of the events after it."""
        position = self.log.next_seq  # taken with the store at the same boundary (no await)
        verify = self.stages.verify
        assert verify is not None
        items = verify.open_items()
        if self.log.ended or items.run in ("finished", "errored"):
            # Over (its thread being saved): the thread as the run left it, as a complete run.
            store = self.store
            prelude = thread_prelude(
                self.thread_id,
                self.run_id,
                store.messages_wire(),
                store.state,
                store.pending_interrupts,
            )
            return prelude, self.reader(position)
        prelude = join_prelude(self.thread_id, self.run_id, self.store, verify)
        # The run's own RUN_STARTED is the prelude's first event: never sent twice.
        return prelude, self.reader(max(position, 1))

    # -- ending ------------------------------------------------------------------------------

    @property
    def events(self) -> int:
        return self.log.next_seq

    async def stop(self, reason: StopReason) -> bool:
        """Cancel the agent; the run ends as ``reason`` says. Whether it was still running."""
        return self._stop(reason)

    async def wait_ended(self, within: float) -> bool:
        with anyio.move_on_after(within):
            await self.ended.wait()
        return self.ended.is_set()

    def _stop(self, reason: StopReason) -> bool:
        if self.ended.is_set() or self.agent_scope.cancel_called:
            return False
        self.reason = reason
        self.agent_scope.cancel()
        return True

    def echoed_input(self) -> RunAgentInput:
        """What RUN_STARTED echoes of the input: the messages this run added to the thread."""
        return RunAgentInput(
            thread_id=self.thread_id, run_id=self.run_id, messages=self.new_messages
        )

    def started_event(self) -> RunStartedEvent:
        if not self.new_messages:
            event = RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)
        else:
            event = RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, input=self.echoed_input()
            )
        return stamped(event, self.carrier)

    def closing_events(self) -> list[Event]:
        """What ends the run when the agent's stream ended without a terminal event."""
        reason = self.reason
        if reason in ("stopped", "superseded"):
            verify = self.stages.verify
            assert verify is not None
            items = verify.open_items()
            events: list[Event] = [ToolCallEndEvent(tool_call_id=i) for i in items.tool_calls]
            events += [TextMessageEndEvent(message_id=i) for i in items.text_messages]
            events += [ReasoningMessageEndEvent(message_id=i) for i in items.reasoning_messages]
            events += [ReasoningEndEvent(message_id=i) for i in items.reasoning_spans]
            events += [
                StepFinishedEvent(step_name=name)
                if owner is None
                else StepFinishedEvent(step_name=name, subagent_run_id=owner)
                for name, owner in reversed(items.steps)
            ]
            events += [
                SubagentErrorEvent(
                    subagent_run_id=i, message="cancelled: the run was stopped", code="cancelled"
                )
                for i in items.subagents
            ]
            events.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedCancelledOutcome(),
                )
            )
            return events
        if reason == "budget_exceeded":
            return [RunErrorEvent(message=self.budget_message, code=BUDGET_CODE)]
        if reason is not None:
            message = _ERRORS[reason].format(
                linger=self.registry.linger, max_run_time=self.registry.max_run_time
            )
            return [RunErrorEvent(message=message, code=reason)]
        if self.failure is not None:
            failure = self.failure
            detail = str(failure) if isinstance(failure, AguiMetaError) else type(failure).__name__
            return [RunErrorEvent(message=f"the agent failed: {detail}", code="agent_error")]
        return [
            RunErrorEvent(
                message="the agent's stream ended without RUN_FINISHED or RUN_ERROR",
                code="incomplete",
            )
        ]

    # -- running -----------------------------------------------------------------------------

    def _frame(self, seq: int, event: Event) -> bytes:
        return encode_sse(encode_event(event), id=f"{self.key}:{seq}")

    async def execute(self) -> None:
        """Run the agent to the end of the run, then save the thread (in the gateway's tasks)."""
        registry = self.registry
        try:
            await registry.catalog.run_started(self.thread_id, self.run_id)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_readers)
                await self._stream()
                tg.cancel_scope.cancel()
        except Exception:  # never into the gateway's task group: it holds every other run
            logger.exception("run %s of thread %s failed", self.run_id, self.thread_id)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(registry.save_timeout):
                await self._finish()

    async def _stream(self) -> None:
        handoff = _Handoff(_AHEAD)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump, handoff)
            try:
                async with wrap(handoff, _Guard(self), *self.stages) as updates:
                    async for batch in updates.batches():
                        seq = self.log.next_seq
                        frames = []
                        for update in batch:
                            event = update.event if isinstance(update, Update) else update
                            frames.append(self._frame(seq, event))
                            seq += 1
                        await self.log.append(frames)
            except Exception as exc:
                # The agent's events broke the rules (or a stage failed): what passed stays,
                # the run ends here.
                self.agent_scope.cancel()
                if isinstance(exc, (AguiMetaError, DataError)):
                    logger.warning("run %s of thread %s: %s", self.run_id, self.thread_id, exc)
                    detail = str(exc)
                else:
                    logger.exception("run %s of thread %s failed", self.run_id, self.thread_id)
                    detail = type(exc).__name__
                error = RunErrorEvent(
                    message=f"the agent's events were refused: {detail}", code="server_error"
                )
                await self.log.append([self._frame(self.log.next_seq, error)])
            finally:
                handoff.abandon()

    async def _pump(self, handoff: _Handoff) -> None:
        try:
            with self.agent_scope:
                try:
                    if self.reason is None:  # else ended before it began (its budget)
                        await self.agent(self.input, handoff.put)
                except anyio.BrokenResourceError:
                    pass  # the run's pipeline stopped reading: it has ended already
                except Exception as exc:
                    logger.exception("the agent of run %s failed", self.run_id)
                    self.failure = exc
            if self.agent_scope.cancelled_caught and self.reason is None:
                self.reason = "run_timeout"
        finally:
            handoff.close()

    async def _watch_readers(self) -> None:
        """Stop the run when it has had no reader for the registry's ``linger``."""
        while True:
            changed = self._readers_changed
            if self.readers:
                await changed.wait()
                continue
            with anyio.move_on_after(self.registry.linger):
                await changed.wait()
            if not self.readers and not changed.is_set():
                self._stop("abandoned")
                return

    async def _finish(self) -> None:
        registry = self.registry
        try:
            await self.log.end()
            ledger = self.stages.ledger
            ledger.close()
            registry._charge(self, [u for record in ledger.runs for u in record.usage])
            snapshot = self.base.advance(self.store, ledger.runs)
            try:
                await registry.threads.save(snapshot)
            except VersionConflict:
                logger.exception("run %s: its thread could not be saved", self.run_id)
            await registry.catalog.run_ended(self.thread_id, self.run_id)
        finally:
            self.ended_at = anyio.current_time()
            registry._ended(self)
            self._release()
            self.ended.set()

    def _release(self) -> None:
        """Let go of the thread (it is saved): an ended run is kept for its log only."""
        self.stages = DefaultStages(Store(), ledger=Ledger())
        self.input = RunAgentInput(thread_id=self.thread_id, run_id=self.run_id, messages=[])
        self.base = ThreadSnapshot(thread_id=self.thread_id)
        self.new_messages = []


class _Handoff:
    """What the agent produces, handed to the run's pipeline: at most ``size`` items ahead.

    A memory object stream costs a task switch per item; here the agent's task goes on while
    there is room, and the pipeline takes what is there, so both run in stretches.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: deque[Any] = deque()
        self.closed = False  # the agent is done
        self.abandoned = False  # the pipeline is done
        self._changed = anyio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def put(self, item: Any) -> None:
        while len(self.items) >= self.size:
            if self.abandoned:
                raise anyio.BrokenResourceError
            await self._changed.wait()
        if self.abandoned:
            raise anyio.BrokenResourceError
        self.items.append(item)
        if len(self.items) == 1:
            self._notify()

    def close(self) -> None:
        self.closed = True
        self._notify()

    def abandon(self) -> None:
        self.abandoned = True
        self._notify()

    def __aiter__(self) -> _Handoff:
        return self

    async def __anext__(self) -> Any:
        items = self.items
        while not items:
            if self.closed:
                raise StopAsyncIteration
            await self._changed.wait()
        if len(items) == self.size:
            self._notify()  # the agent may go on
        return items.popleft()


class _CountedReader:
    """A reader of a run that counts as one of the run's readers until closed."""

    def __init__(self, run: Run, reader: ReplayReader) -> None:
        self.run = run
        self.inner = reader
        self._open = True
        run._reader_count(1)

    async def read(self, wait: float) -> list[bytes] | None:
        return await self.inner.read(wait)

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self.run._reader_count(-1)
            await self.inner.aclose()


class MemoryRuns:
    """The runs of this process (a :class:`~agui_meta._registry.RunRegistry`): the active run
    of each thread, and recently ended ones, in the task group of :meth:`running`.

    :param threads: where threads are loaded from and saved to.
    :param catalog: thread ownership and the journal of runs in flight.
    :param max_runs: the most runs active at once.
    :param linger: seconds a run goes on with no reader before it is cancelled.
    :param max_run_time: seconds a run may take before it is cancelled.
    :param max_events: events a run's log keeps (a reader further behind loses the stream).
    :param keep: seconds an ended run is kept for clients that come back.
    :param max_kept: the most ended runs kept.
    :param stop_timeout: how long :meth:`running` waits, on the way out, for the runs it
        stopped to end (then they are cancelled).
    :param budget: a :class:`~agui_meta.Budget` for the runs' scopes: a run whose scope is over
        it is ended at its start, each run's usage is charged to its scope at its end, and a
        run that takes its scope past a limit stops the scope's other active runs.
    """

    def __init__(
        self,
        threads: ThreadStore,
        catalog: Catalog,
        *,
        max_runs: int = 100,
        linger: float = 30.0,
        max_run_time: float = 3600.0,
        max_events: int = 10_000,
        keep: float = 60.0,
        max_kept: int = 1000,
        save_timeout: float = 30.0,
        stop_timeout: float = 30.0,
        budget: Budget[Any] | None = None,
    ) -> None:
        for name, value in (("max_runs", max_runs), ("max_events", max_events)):
            if value < 1:
                raise UsageError(f"{name} must be at least 1, got {value}")
        for name, number in (
            ("linger", linger),
            ("max_run_time", max_run_time),
            ("keep", keep),
            ("save_timeout", save_timeout),
            ("stop_timeout", stop_timeout),
        ):
            if not number >= 0:
                raise UsageError(f"{name} must be >= 0, got {number}")
        if max_kept < 0:
            raise UsageError(f"max_kept must be >= 0, got {max_kept}")
        self.threads = threads
        self.catalog = catalog
        self.max_runs = max_runs
        self.linger = linger
        self.max_run_time = max_run_time
        self.max_events = max_events
        self.keep = keep
        self.max_kept = max_kept
        self.save_timeout = save_timeout
        self.stop_timeout = stop_timeout
        self.budget = budget
        self._tg: anyio.abc.TaskGroup | None = None
        self._active: dict[str, Run] = {}
        self._by_key: dict[str, Run] = {}
        self._by_ids: dict[tuple[str, str], Run] = {}
        self._kept: OrderedDict[str, Run] = OrderedDict()
        #: thread id -> (the ordinal of its latest run, that run, set when the next one starts)
        self._latest: dict[str, tuple[int, Run | None, anyio.Event]] = {}
        self._ordinal = 0
        self._idle = anyio.Event()
        self._idle.set()

    def __len__(self) -> int:
        """How many runs are active."""
        return len(self._active)

    def active_run(self, thread_id: str) -> RunHandle | None:
        """The active run of ``thread_id`` (synchronous: for inspection and tests)."""
        return self._active.get(thread_id)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self._tg is not None:
            raise UsageError("the runs are running already")
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                for run in list(self._active.values()):
                    run._stop("gateway_shutdown")
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.stop_timeout):
                    await self._idle.wait()
                tg.cancel_scope.cancel()

    # The RunRegistry protocol (nothing here waits: each is atomic in this process).

    async def active(self, thread_id: str) -> RunHandle | None:
        return self._active.get(thread_id)

    async def active_runs(self) -> list[RunHandle]:
        return list(self._active.values())

    async def by_key(self, key: str) -> RunHandle | None:
        self._purge()
        return self._by_key.get(key)

    async def find(self, thread_id: str, run_id: str) -> RunHandle | None:
        self._purge()
        return self._by_ids.get((thread_id, run_id))

    async def check_room(self, thread_id: str) -> None:
        self._check_room(thread_id)

    def _check_room(self, thread_id: str) -> None:
        active = self._active.get(thread_id)
        if active is not None:
            raise ThreadBusy(thread_id, active.run_id, active.agent_name)
        if len(self._active) >= self.max_runs:
            raise AtCapacity(self.max_runs)

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
        if self._tg is None:
            raise UsageError("the runs are not running (enter `running()` first)")
        self._check_room(input.thread_id)
        run = Run(
            self,
            scope=scope,
            agent_name=agent_name,
            agent=agent,
            input=input,
            store=store,
            base=base,
            new_messages=new_messages,
        )
        self._check_budget(run)
        self._launch(run)
        return run

    # -- budgets -----------------------------------------------------------------------------

    def _check_budget(self, run: Run) -> None:
        """End ``run`` before its agent is called when its scope is over the budget."""
        budget = self.budget
        if budget is not None:
            self._refuse_over(run, budget.over(run.scope))

    def _refuse_over(self, run: Run, over: str | None) -> None:
        budget = self.budget
        if budget is None or over is None:
            return
        self._budget_stop(run, budget.refusal(run.scope, run.run_id, over))
        budget.note_ended(run.thread_id, run.run_id, run.scope)

    def _budget_stop(self, run: Run, message: str) -> None:
        assert self.budget is not None
        if run._stop("budget_exceeded"):
            run.budget_message = message
            logger.warning("%s", message)
            self.budget.exceeded(message, "RUN_STARTED")

    def _charge(self, run: RunHandle, usage: list[Any]) -> None:
        """Charge a run's usage to its scope (once: at its end); past a limit, stop the
        scope's other active runs."""
        budget = self.budget
        if budget is None or not usage:
            return
        self._crossed(run, budget.charge(run.scope, usage))

    def _crossed(self, run: RunHandle, over: str | None) -> list[Run]:
        """Report ``run`` when it took its scope past a limit (``over``), and stop the scope's
        other active runs of this process (per period); those it stopped."""
        budget = self.budget
        if budget is None or over is None:
            return []
        message = budget.crossing(run.scope, run.run_id, over)
        logger.warning("%s", message)
        budget.exceeded(message)
        if budget.period is None:
            return []  # per run: the others have budgets of their own
        stopped = []
        for other in list(self._active.values()):
            if other is not run and other.scope == run.scope:
                self._budget_stop(other, budget.refusal(run.scope, other.run_id, over))
                stopped.append(other)
        return stopped

    def _launch(self, run: Run) -> None:
        """Hold ``run`` as its thread's active run and start it in the task group."""
        assert self._tg is not None
        self._purge()
        self._active[run.thread_id] = run
        self._by_key[run.key] = run
        self._by_ids[run.thread_id, run.run_id] = run
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._ordinal += 1
        found = self._latest.get(run.thread_id)
        self._latest[run.thread_id] = (self._ordinal, run, anyio.Event())
        if found is not None:
            found[2].set()
        self._tg.start_soon(run.execute)

    async def latest(self, thread_id: str) -> tuple[int, RunHandle | None]:
        found = self._latest.get(thread_id)
        return (0, None) if found is None else (found[0], found[1])

    async def wait_started(self, thread_id: str, after: int, within: float) -> None:
        found = self._latest.get(thread_id)
        if found is not None and found[0] > after:
            return
        if found is None:  # an idle thread: an entry whose event the next start sets
            found = self._latest[thread_id] = (0, None, anyio.Event())
        with anyio.move_on_after(within):
            await found[2].wait()

    async def forget_thread(self, thread_id: str) -> None:
        for key, run in list(self._kept.items()):
            if run.thread_id == thread_id:
                self._drop(key)
        found = self._latest.pop(thread_id, None)
        if found is not None:
            found[2].set()

    def _ended(self, run: Run) -> None:
        if self._active.get(run.thread_id) is run:
            del self._active[run.thread_id]
        if not self._active:
            self._idle.set()
        if self.max_kept and self.keep > 0:
            self._kept[run.key] = run
        else:
            self._drop(run.key, run)
        self._purge()

    def _drop(self, key: str, run: Run | None = None) -> None:
        run = self._kept.pop(key, None) or run
        if run is not None:
            self._by_key.pop(key, None)
            if self._by_ids.get((run.thread_id, run.run_id)) is run:
                del self._by_ids[run.thread_id, run.run_id]
            found = self._latest.get(run.thread_id)
            if found is not None and found[1] is run:
                del self._latest[run.thread_id]
                found[2].set()

    def _purge(self) -> None:
        now = anyio.current_time()
        while self._kept:
            key, run = next(iter(self._kept.items()))
            ended = run.ended_at if run.ended_at is not None else now
            if len(self._kept) > self.max_kept or now - ended >= self.keep:
                self._drop(key)
            else:
                break


if TYPE_CHECKING:  # mypy checks that both keep the contract

    def _handle(run: Run) -> RunHandle:
        return run

    def _registry(runs: MemoryRuns) -> RunRegistry:
        return runs
