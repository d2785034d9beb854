"""The default stages: what a consumer of an AG-UI stream almost always wants, in order.

:class:`DefaultStages` holds ``ExpandChunks() → Verify() → Accumulate(store) → Ledger()`` as one
object that unpacks into :func:`agui_meta.wrap` and keeps the store and the ledger at hand
afterwards::

    stages = agui_meta.DefaultStages()
    async with agui_meta.wrap(source, *stages) as stream:
        async for update in stream:
            ...
    stages.store.messages_wire()   # the conversation, as the reference client holds it
    stages.ledger.runs             # usage, outcome and run metadata

Decoding needs no stage: ``wrap()`` decodes whatever the source yields. Outside a pipeline
:func:`agui_meta.run_sync` decodes too; hand-built chains put :class:`agui_meta.Enforce` first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from ._accumulate import Accumulate
from ._chunks import ExpandChunks
from ._ledger import Ledger
from ._stage import Transducer
from ._store import ItemStore, Store
from ._verify import Verify

__all__ = ["DefaultStages"]

S = TypeVar("S", bound=ItemStore)

if TYPE_CHECKING:

    class InDefaultStages(Transducer[Any, Any]):
        """For type checkers only: a stage unpacked from a :class:`DefaultStages`.

        ``wrap(source, *stages)`` (any stages before them) is typed ``Pipeline[Update]`` by
        an overload of :func:`~agui_meta.wrap` that accepts these: the default chain ends in
        the accumulator and the ledger, so what it yields is an :class:`~agui_meta.Update`.
        """


class DefaultStages(Generic[S]):
    """The default stages of one stream: expand chunks, verify, accumulate, ledger.

    Iterating gives the stages in pipeline order, so ``wrap(source, *stages)`` runs them (and
    the pipeline is typed as yielding :class:`~agui_meta.Update`); ``store``, ``expand_chunks``,
    ``verify``, ``accumulate`` and ``ledger`` name each afterwards. The stages hold the
    stream's state: use a new instance for every stream.

    :param store: the store to accumulate into (a new :class:`~agui_meta.Store` by default;
        ``store`` is typed as the one given).
    :param verify: ``False`` leaves the order checks out (``verify`` is then ``None``); a
        :class:`~agui_meta.Verify` is used as it is (for example
        ``Verify(report_unfinished=True)``).
    :param ledger: the run ledger to use (for example ``agui_meta.Ledger(on_run=...)``); a
        new one by default.

    >>> import anyio, agui_meta
    >>> async def main():
    ...     events = [
    ...         {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    ...         {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "Hi",
    ...          "metadata": {"acme.model": "m-1"}},
    ...         {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ...     ]
    ...     stages = agui_meta.DefaultStages()
    ...     async with agui_meta.wrap(events, *stages) as stream:
    ...         await stream.drain()
    ...     return stages.store.messages_wire(), stages.ledger.runs[0].status
    >>> anyio.run(main)
    ([{'id': 'm', 'role': 'assistant', 'content': 'Hi', 'metadata': {'acme.model': 'm-1'}}], 'finished')
    """

    __slots__ = ("accumulate", "expand_chunks", "ledger", "store", "verify")

    @overload
    def __init__(
        self: DefaultStages[Store],
        store: None = None,
        *,
        verify: bool | Verify = True,
        ledger: Ledger[Any] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        store: S,
        *,
        verify: bool | Verify = True,
        ledger: Ledger[Any] | None = None,
    ) -> None: ...
    def __init__(
        self,
        store: Any = None,
        *,
        verify: bool | Verify = True,
        ledger: Ledger[Any] | None = None,
    ) -> None:
        self.store: S = store if store is not None else Store()  # type: ignore[assignment]
        self.expand_chunks = ExpandChunks()
        self.verify: Verify | None = (
            verify if isinstance(verify, Verify) else Verify() if verify else None
        )
        self.accumulate = Accumulate(self.store)
        self.ledger: Ledger[Any] = ledger if ledger is not None else Ledger()

    def __iter__(self) -> Iterator[InDefaultStages]:
        stages: list[Transducer[Any, Any]] = [self.expand_chunks]
        if self.verify is not None:
            stages.append(self.verify)
        stages += (self.accumulate, self.ledger)
        return iter(cast("list[InDefaultStages]", stages))

    def __repr__(self) -> str:
        names = ", ".join(type(stage).__name__ for stage in self)
        return f"DefaultStages({names})"
