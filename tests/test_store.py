"""The item store: wire output, keyed lookups, the order structure, lazy joins and eviction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_meta import (
    Accumulate,
    ItemStore,
    MessageItem,
    Report,
    Store,
    ToolCallItem,
    Update,
    run_sync,
)
from agui_meta._stage import Context
from agui_meta.events import AnyEvent, Event, UserMessage


def ev(type: str, **fields: Any) -> Event:
    event: Event = msgspec.convert({"type": type, **fields}, AnyEvent)
    return event


def run(events: list[Event], store: Store) -> list[Update]:
    reports: list[Report] = []
    return run_sync([Accumulate(store)], events, on_report=reports.append)


RUN = {"threadId": "t", "runId": "r"}


class TestWire:
    def test_a_history_is_copied_with_its_unknown_members(self) -> None:
        history = [
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "a"}], "x": {"k": 1}}
        ]
        store = Store(history)
        history[0]["x"]["k"] = 2  # type: ignore[index]
        assert store.messages_wire() == [
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "a"}], "x": {"k": 1}}
        ]

    def test_a_history_of_structs(self) -> None:
        store = Store([UserMessage(id="u", content="hi", metadata={"a": 1})])
        assert store.messages_wire() == [
            {"id": "u", "role": "user", "content": "hi", "metadata": {"a": 1}}
        ]

    def test_absent_optionals_are_omitted(self) -> None:
        store = Store()
        run([ev("TOOL_CALL_START", toolCallId="c", toolCallName="f")], store)
        assert store.messages_wire() == [
            {
                "id": "c",
                "role": "assistant",
                "toolCalls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
                ],
            }
        ]

    def test_to_wire_is_a_frozen_copy(self) -> None:
        store = Store()
        run([ev("TEXT_MESSAGE_START", messageId="m", metadata={"k": [1]})], store)
        item = store.message("m")
        assert item is not None
        frozen = item.to_wire()
        frozen["metadata"]["k"].append(2)
        assert item.metadata == {"k": [1]}
        run([ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="x")], store)
        assert frozen["content"] == ""

    def test_the_default_state_is_an_empty_object_and_a_given_one_is_copied(self) -> None:
        assert Store().state == {}
        state = {"a": [1]}
        store = Store(state=state)
        state["a"].append(2)
        assert store.state == {"a": [1]}

    def test_item_accessors(self) -> None:
        store = Store(
            [
                {"id": "t", "role": "tool", "toolCallId": "c", "content": "r"},
                {"id": "a", "role": "activity", "activityType": "p", "content": {}},
                {"id": "u", "role": "user", "content": "q", "name": "n", "subagentRunId": "s"},
            ]
        )
        tool, activity, user = store.messages()
        assert tool.tool_call_id == "c" and activity.activity_type == "p"
        assert user.name == "n" and user.subagent_run_id == "s"
        assert user.encrypted_value is None

    def test_absent_members_read_none_and_round_trip_apart_from_nulls(self) -> None:
        history = [
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {
                "id": "b",
                "role": "assistant",
                "content": None,
                "metadata": None,
                "name": None,
                "toolCalls": [{"id": None, "type": "function", "function": {"name": None}}],
            },
            {"role": "user"},
        ]
        store = Store(history)
        absent, nulls, bare = store.messages()
        for item in (absent, nulls, bare):
            assert item.content is None and item.metadata is None and item.name is None
            assert item.subagent_run_id is None and item.encrypted_value is None
        assert bare.id is None and bare.role == "user"
        assert absent.tool_calls is not None and nulls.tool_calls is not None
        call, null_call = absent.tool_calls[0], nulls.tool_calls[0]
        assert (call.metadata, call.encrypted_value) == (None, None)
        assert (null_call.id, null_call.name, null_call.arguments) == (None, None, None)
        # Absent stays absent and null stays null on the wire, as the reference holds them.
        assert store.messages_wire() == history


class TestLookups:
    def test_the_first_message_with_an_id_wins(self) -> None:
        store = Store(
            [
                {"id": "d", "role": "user", "content": "1"},
                {"id": "d", "role": "user", "content": "2"},
            ]
        )
        first = store.message("d")
        assert first is not None and first.content == "1"
        run([ev("TEXT_MESSAGE_CONTENT", messageId="d", delta="+")], store)
        assert [m["content"] for m in store.messages_wire()] == ["1+", "2"]

    def test_evicting_the_first_of_two_duplicates_finds_the_second(self) -> None:
        store = Store(
            [
                {"id": "d", "role": "user", "content": "1"},
                {"id": "d", "role": "user", "content": "2"},
            ]
        )
        first = store.message("d")
        assert first is not None
        store.evict(first)
        second = store.message("d")
        assert second is not None and second.content == "2"

    def test_tool_calls_are_found_by_their_own_id(self) -> None:
        store = Store(
            [
                {
                    "id": "x",
                    "role": "assistant",
                    "toolCalls": [
                        {"id": "x", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ],
                }
            ]
        )
        call = store.tool_call("x")
        message = store.message("x")
        assert isinstance(call, ToolCallItem) and isinstance(message, MessageItem)
        assert call.owner is message
        assert store.tool_calls == {"x": call}

    def test_the_store_satisfies_the_protocol(self) -> None:
        store: ItemStore = Store()
        assert store.message("nope") is None and store.tool_call("nope") is None


class _NoScanStore(Store):
    """A store whose full iteration is forbidden while ``scans_allowed`` is false."""

    scans_allowed = True

    def messages(self) -> Iterator[MessageItem]:
        if not self.scans_allowed:
            raise AssertionError("a full scan of the messages on a per-event path")
        return super().messages()


class TestStructure:
    def test_no_event_of_a_streamed_turn_scans_the_history(self) -> None:
        history = [{"id": f"h{i}", "role": "user", "content": "x"} for i in range(2000)]
        store = _NoScanStore(history)
        store.scans_allowed = False
        events = [ev("RUN_STARTED", **RUN)]
        for turn in range(50):
            m, c = f"m{turn}", f"c{turn}"
            events += [
                ev("TEXT_MESSAGE_START", messageId=m),
                ev("TEXT_MESSAGE_CONTENT", messageId=m, delta="a", metadata={"k": turn}),
                ev("TEXT_MESSAGE_END", messageId=m),
                ev("TOOL_CALL_START", toolCallId=c, toolCallName="f", parentMessageId=m),
                ev("TOOL_CALL_ARGS", toolCallId=c, delta="{}"),
                ev("TOOL_CALL_END", toolCallId=c),
                ev("TOOL_CALL_RESULT", messageId=f"r{turn}", toolCallId=c, content="ok"),
                ev(
                    "REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId=c, encryptedValue="e"
                ),
                ev("ACTIVITY_SNAPSHOT", messageId=f"a{turn}", activityType="p", content={"n": 0}),
                ev(
                    "ACTIVITY_DELTA",
                    messageId=f"a{turn}",
                    activityType="p",
                    patch=[{"op": "replace", "path": "/n", "value": 1}],
                ),
            ]
        events.append(ev("RUN_FINISHED", **RUN))
        run(events, store)
        store.scans_allowed = True
        ids = [m["id"] for m in store.messages_wire()]
        assert len(ids) == 2000 + 50 * 3
        assert ids[2000:2006] == ["m0", "r0", "a0", "m1", "r1", "a1"]

    def test_many_results_for_one_owner_among_many_messages(self) -> None:
        history: list[dict[str, Any]] = [
            {"id": f"h{i}", "role": "user", "content": "x"} for i in range(1000)
        ]
        history.insert(
            500,
            {
                "id": "owner",
                "role": "assistant",
                "toolCalls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": ""}}
                    for i in range(300)
                ],
            },
        )
        store = Store(history)
        run(
            [
                ev("TOOL_CALL_RESULT", messageId=f"r{i}", toolCallId=f"c{i}", content=str(i))
                for i in range(300)
            ],
            store,
        )
        ids = [m["id"] for m in store.messages_wire()]
        assert ids[500:802] == ["owner", *(f"r{i}" for i in range(300)), "h500"]
        assert len(ids) == 1301

    def test_the_tool_run_behind_an_owner_is_cached(self) -> None:
        store = Store()
        run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                *(
                    ev("TOOL_CALL_RESULT", messageId=f"r{i}", toolCallId="c", content="")
                    for i in range(5)
                ),
            ],
            store,
        )
        owner = store.message("m")
        assert owner is not None
        node = store._first(owner)
        last = store.message("r4")
        assert node is not None and node.tail is not None and node.tail.item is last

    def test_a_message_appended_behind_the_tool_run_joins_it(self) -> None:
        """Tool messages added by other means after the run still count as part of it."""
        store = Store()
        run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="c", content=""),
                ev(
                    "RUN_STARTED",
                    **RUN,
                    input={
                        **RUN,
                        "messages": [
                            {"id": "t", "role": "tool", "toolCallId": "z", "content": ""},
                            {"id": "u", "role": "user", "content": "q"},
                        ],
                    },
                ),
                ev("TOOL_CALL_RESULT", messageId="r2", toolCallId="c", content=""),
            ],
            store,
        )
        assert [m["id"] for m in store.messages_wire()] == ["m", "r1", "t", "r2", "u"]

    def test_deltas_are_joined_lazily_and_once(self) -> None:
        store = Store()
        deltas = [f"{i}," for i in range(1000)]
        run(
            [ev("TEXT_MESSAGE_START", messageId="m")]
            + [ev("TEXT_MESSAGE_CONTENT", messageId="m", delta=d) for d in deltas],
            store,
        )
        item = store.message("m")
        assert item is not None
        assert len(item._parts) == 1000
        assert item.content == "".join(deltas)
        assert item._parts is None  # joined: no list left for the collector to walk
        run([ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="end")], store)
        assert item.content == "".join(deltas) + "end"
        assert item._parts is None

    def test_arguments_are_joined_lazily(self) -> None:
        store = Store()
        run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f")]
            + [ev("TOOL_CALL_ARGS", toolCallId="c", delta=d) for d in ('{"a"', ":", "1}")],
            store,
        )
        call = store.tool_call("c")
        assert call is not None and call.arguments == '{"a":1}'


def _turn(n: int) -> list[Event]:
    m, c, a, r = f"m{n}", f"c{n}", f"act{n}", f"rs{n}"
    return [
        ev("RUN_STARTED", **RUN),
        ev("REASONING_MESSAGE_START", messageId=r, role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId=r, delta="hmm"),
        ev("REASONING_MESSAGE_END", messageId=r),
        ev("ACTIVITY_SNAPSHOT", messageId=a, activityType="p", content={"done": 0}),
        ev("TEXT_MESSAGE_START", messageId=m, metadata={"turn": n}),
        ev("TEXT_MESSAGE_CONTENT", messageId=m, delta="answer"),
        ev("TOOL_CALL_START", toolCallId=c, toolCallName="f", parentMessageId=m),
        ev("TOOL_CALL_ARGS", toolCallId=c, delta="{}"),
        ev("TEXT_MESSAGE_END", messageId=m, metadata={"usage": n}),
        ev("TOOL_CALL_END", toolCallId=c),
        ev("TOOL_CALL_RESULT", messageId=f"res{n}", toolCallId=c, content="ok"),
        ev(
            "ACTIVITY_DELTA",
            messageId=a,
            activityType="p",
            patch=[{"op": "replace", "path": "/done", "value": 1}],
        ),
        ev("STATE_DELTA", delta=[{"op": "replace", "path": "/n", "value": n}]),
        ev("RUN_FINISHED", **RUN),
    ]


class TestEviction:
    def test_memory_stays_bounded_over_a_long_stream(self) -> None:
        store = Store(state={"n": 0}, evict_completed=True)
        sizes = []
        updates: list[Update] = []
        head = Accumulate(store).connect(updates.append, Context(on_report=lambda r: None))
        for n in range(500):
            peak = 0
            for event in _turn(n):
                head(event)
                peak = max(peak, len(store), len(store._by_id), len(store._calls))
            sizes.append(peak)
            assert len(store) == 0 and not store._by_id and not store._calls
            updates.clear()
        assert max(sizes) == sizes[0] <= 4
        assert store.state == {"n": 499}

    def test_updates_keep_their_items_after_eviction(self) -> None:
        store = Store(evict_completed=True)
        updates = run(_turn(7), store)
        by_type = {u.event.type: u for u in updates}
        end = by_type["TEXT_MESSAGE_END"]
        assert isinstance(end.item, MessageItem)
        assert end.item.to_wire() == {
            "id": "m7",
            "role": "assistant",
            "content": "answer",
            "toolCalls": [
                {"id": "c7", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
            "metadata": {"turn": 7, "usage": 7},
        }
        assert end.item.evicted
        delta = by_type["ACTIVITY_DELTA"]
        assert isinstance(delta.item, MessageItem) and delta.item.content == {"done": 1}

    def test_open_items_are_kept(self) -> None:
        store = Store(evict_completed=True)
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("TEXT_MESSAGE_START", messageId="open"),
                *(
                    ev(t, messageId="closed", **kw)
                    for t, kw in (
                        ("TEXT_MESSAGE_START", {}),
                        ("TEXT_MESSAGE_CONTENT", {"delta": "x"}),
                        ("TEXT_MESSAGE_END", {}),
                    )
                ),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f"),
                ev("RUN_ERROR", message="boom"),
            ],
            store,
        )
        assert [m["id"] for m in store.messages_wire()] == ["open", "c"]

    def test_a_message_with_an_open_tool_call_waits_for_it(self) -> None:
        store = Store(evict_completed=True)
        run(
            [
                ev("TEXT_MESSAGE_START", messageId="m"),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TEXT_MESSAGE_END", messageId="m"),
            ],
            store,
        )
        assert [m["id"] for m in store.messages_wire()] == ["m"]
        run([ev("TOOL_CALL_END", toolCallId="c")], store)
        assert store.messages_wire() == []

    def test_activity_is_kept_until_the_run_ends(self) -> None:
        store = Store(evict_completed=True)
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"v": 1}),
            ],
            store,
        )
        assert [m["id"] for m in store.messages_wire()] == ["a"]
        run([ev("RUN_FINISHED", **RUN)], store)
        assert store.messages_wire() == []

    def test_a_later_start_with_an_evicted_id_creates_a_new_message(self) -> None:
        store = Store(evict_completed=True)
        first = run(
            [ev("TEXT_MESSAGE_START", messageId="m"), ev("TEXT_MESSAGE_END", messageId="m")], store
        )
        again = run([ev("TEXT_MESSAGE_START", messageId="m")], store)
        assert first[0].item is not again[0].item
        assert [m["id"] for m in store.messages_wire()] == ["m"]

    def test_without_eviction_everything_is_kept(self) -> None:
        store = Store()
        run(_turn(1) + _turn(2), store)
        assert len(store) == 2 * 4


def _frozen_updates(events: list[Event], store: Store) -> list[tuple[str, bool, Any]]:
    """Each update as it is emitted: its type, done, and a frozen copy of its item."""
    seen: list[tuple[str, bool, Any]] = []

    def record(update: Update) -> None:
        item = None if update.item is None else update.item.to_wire()
        seen.append((update.event.type, update.done, item))

    head = Accumulate(store).connect(record, Context(on_report=lambda r: None))
    for event in events:
        head(event)
    return seen


def test_the_same_updates_with_and_without_eviction() -> None:
    """Eviction changes what the store retains, not what a stream of turns yields."""
    events = [e for n in range(3) for e in _turn(n)]
    evicting = Store(evict_completed=True)
    assert _frozen_updates(events, evicting) == _frozen_updates(events, Store())
    assert evicting.messages_wire() == []


# -- the order's links (a singly linked list; dead nodes dropped at the head or in one pass)

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(["assistant", "tool", "user"])),
        st.tuples(st.just("result"), st.integers(0, 40)),
        st.tuples(st.just("evict"), st.integers(0, 80)),
    ),
    max_size=150,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_the_order_under_appends_results_and_evictions_is_a_lists(ops: list[Any]) -> None:
    # The store's order against a plain list: a message appended at the end; a tool result
    # after its owner's first position and the tool messages behind it (at the end when the
    # owner is gone); an evicted message out of every position it holds.
    from agui_meta import MessageItem

    store, model, made = Store(), [], []
    owners: list[MessageItem] = []
    for op, arg in ops:
        if op == "append":
            item = MessageItem(f"m{len(made)}", arg)
            store.append(item)
            model.append(item)
            if arg == "assistant":
                owners.append(item)
        elif op == "result":
            item = MessageItem(f"m{len(made)}", "tool")
            owner = owners[arg % len(owners)] if owners else None
            store.insert_result(item, owner)
            if owner is not None and any(m is owner for m in model):
                at = next(i for i, m in enumerate(model) if m is owner) + 1
                while at < len(model) and model[at].role == "tool":
                    at += 1
                model.insert(at, item)
            else:
                model.append(item)
        else:
            if not made:
                continue
            item = made[arg % len(made)]
            store.evict(item)
            model = [m for m in model if m is not item]
        if op != "evict":
            made.append(item)
        assert [m.id for m in store.messages()] == [m.id for m in model]
        assert len(store) == len(model)
        assert store._dead <= store._count + 33  # dead nodes stay few
        assert len(store._nodes) == len({id(m) for m in model})


def test_dead_nodes_are_dropped_at_the_head_at_once_and_elsewhere_in_one_pass() -> None:
    from agui_meta import MessageItem

    def linked(store: Store) -> int:
        count, node = 0, store._head
        while node is not None:
            count, node = count + 1, node.next
        return count

    store = Store()
    items = [MessageItem(f"m{i}", "user") for i in range(200)]
    for item in items:
        store.append(item)
    # no node is part of a cycle, none is tracked by the collector
    import gc

    assert store._head is not None and not gc.is_tracked(store._head)
    for item in items[1:120:2]:  # behind the head: marked dead, still linked
        store.evict(item)
    # 60 evicted: past 32 more dead than live at some point? no (140 live): all still linked
    assert (len(store), store._dead, linked(store)) == (140, 60, 200)
    for item in items[121:200:2]:
        store.evict(item)
    for item in items[120:200:2]:
        store.evict(item)
    # 140 evicted, 60 live: the dead came to outnumber the live ones by 32, and one pass
    # dropped them
    assert len(store) == 60 and linked(store) == 60 + store._dead < 60 + 60 + 33
    assert [m.id for m in store.messages()] == [f"m{i}" for i in range(0, 120, 2)]
    for item in items[:120:2]:  # the head each time: dropped at once, with the dead behind it
        store.evict(item)
    assert (len(store), store._dead, linked(store), store._head, store._tail) == (
        0,
        0,
        0,
        None,
        None,
    )
    store.append(MessageItem("n", "user"))
    assert [m.id for m in store.messages()] == ["n"]


def test_a_store_of_millions_of_messages_is_let_go_without_deep_recursion() -> None:
    # The order's nodes are msgspec Structs, freed without CPython's bound on nested
    # deallocations: the store cuts its list before it is freed and when it is reset, or a
    # long one would overflow the C stack. One message at every position (as the reference
    # can hold one object twice): only the first node is also held by the store's index, so
    # the rest would go as one chain. In a child process: that failure is a crash.
    from tests.helpers import python_child

    code = (
        "from agui_meta import MessageItem, Store\n"
        "store, one = Store(), MessageItem('m', 'user')\n"
        "for _ in range(2_000_000): store.append(one)\n"
        "store.reset([MessageItem('a', 'user')])\n"
        "for _ in range(2_000_000): store.append(one)\n"
        "assert len(store) == 2_000_001\n"
        "del store\n"
        "print('let go')\n"
    )
    done = python_child(code)
    assert (done.returncode, done.stdout.strip()) == (0, "let go"), done.stderr[-2000:]
