"""Built-in stages work outside a chain and accept what the others accept.

Fed directly (``stage.feed(event)``, never connected), every built-in stage works: its outputs
are dropped, its reports go to a context of its own. Every stage handles an application's
subclass of an event class as the event it is. ``run_sync`` decodes wire forms (dicts, JSON,
``ag_ui.core`` models) before the first stage, as ``wrap()`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import agui_meta
from agui_meta.events import (
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from tests import needs

WIRE: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"acme.model": "x"}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]


class MyStart(TextMessageStartEvent):
    """An application's own event class: a TEXT_MESSAGE_START with a helper."""

    def shout(self) -> str:
        return self.message_id.upper()


class MyContent(TextMessageContentEvent):
    pass


class MyToolStart(ToolCallStartEvent):
    pass


def events() -> list[Any]:
    return [agui_meta.events.decode_event(e) for e in WIRE]


STAGES: dict[str, Callable[[], agui_meta.Transducer[Any, Any]]] = {
    "Enforce": agui_meta.Enforce,
    "ExpandChunks": agui_meta.ExpandChunks,
    "Verify": agui_meta.Verify,
    "Accumulate": agui_meta.Accumulate,
    "Ledger": agui_meta.Ledger,
    "LintMetadataKeys": agui_meta.LintMetadataKeys,
    "FilterToolCalls": lambda: agui_meta.FilterToolCalls(allowed=["search"]),
}


@pytest.mark.parametrize("make", STAGES.values(), ids=STAGES.keys())
def test_every_built_in_stage_can_be_fed_directly(make: Callable[[], Any]) -> None:
    stage = make()
    for event in events():
        stage.feed(event)
    stage.close()
    assert isinstance(stage.ctx, agui_meta.Context)
    assert stage.ctx.mode == "default"


def test_a_stage_fed_directly_keeps_its_state() -> None:
    accumulate = agui_meta.Accumulate()
    for event in events():
        accumulate.feed(event)
    assert accumulate.store.messages_wire() == [
        {"id": "m", "role": "assistant", "content": "Hi", "metadata": {"acme.model": "x"}}
    ]
    verify = agui_meta.Verify()
    verify.feed(events()[0])
    with pytest.raises(agui_meta.VerifyError):
        verify.feed(events()[0])  # a second RUN_STARTED while the run is open


def test_a_lint_stage_fed_directly_reports_to_its_own_context() -> None:
    lint = agui_meta.LintMetadataKeys()
    with pytest.warns(agui_meta.AguiWarning, match="has no vendor prefix"):
        lint.feed(agui_meta.events.TextMessageEndEvent(message_id="m", metadata={"k": 1}))
    assert [r.code for r in lint.ctx.reports] == ["unprefixed-metadata-key"]


def test_a_misspelt_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'Verify' object has no attribute 'emitt'"):
        agui_meta.Verify().emitt  # type: ignore[attr-defined]  # noqa: B018


def test_accumulate_takes_subclasses_of_event_classes() -> None:
    subclassed = [
        RunStartedEvent(thread_id="t", run_id="r"),
        MyStart(message_id="m", metadata={"a": 1}),
        MyContent(message_id="m", delta="Hi"),
        TextMessageEndEvent(message_id="m"),
        RunFinishedEvent(thread_id="t", run_id="r"),
    ]
    plain = agui_meta.DefaultStages()
    agui_meta.run_sync(plain, events()[:1] + [agui_meta.events.decode_event(e) for e in WIRE[1:]])
    own = agui_meta.DefaultStages()
    updates = agui_meta.run_sync(own, subclassed)
    assert own.store.messages_wire() == [
        {"id": "m", "role": "assistant", "content": "Hi", "metadata": {"a": 1}}
    ]
    assert [u.event for u in updates] == subclassed  # passed through untouched
    assert updates[1].event.shout() == "M"
    assert [type(u.item).__name__ for u in updates] == [
        "NoneType",
        "MessageItem",
        "MessageItem",
        "MessageItem",
        "NoneType",
    ]


def test_accumulate_names_what_it_got_when_it_is_not_an_event() -> None:
    with pytest.raises(agui_meta.UsageError, match=r"got builtins\.dict: decode .*Enforce"):
        agui_meta.Accumulate().feed({"type": "RUN_STARTED"})  # type: ignore[arg-type]


def test_filter_tool_calls_filters_subclasses_too() -> None:
    reports: list[agui_meta.Report] = []
    out = agui_meta.run_sync(
        [agui_meta.FilterToolCalls(disallowed=["rm"])],
        [
            MyToolStart(tool_call_id="c", tool_call_name="rm"),
            ToolCallArgsEvent(tool_call_id="c", delta="{}"),
            ToolCallEndEvent(tool_call_id="c"),
        ],
        on_report=reports.append,
    )
    assert out == []
    assert [r.code for r in reports] == ["tool-call-filtered"] * 3


def test_lint_checks_the_nested_carriers_of_a_subclass() -> None:
    class MySnapshot(agui_meta.events.MessagesSnapshotEvent):
        pass

    reports: list[agui_meta.Report] = []
    message = agui_meta.events.UserMessage(id="u", content="hi", metadata={"bare": 1})
    agui_meta.run_sync(
        [agui_meta.LintMetadataKeys()], [MySnapshot(messages=[message])], on_report=reports.append
    )
    assert [r.path for r in reports] == ["$.messages[0].metadata.bare"]


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(lambda e: e, id="dicts"),
        pytest.param(lambda e: json.dumps(e), id="json-str"),
        pytest.param(lambda e: json.dumps(e).encode(), id="json-bytes"),
        pytest.param(lambda e: agui_meta.events.decode_event(e), id="events"),
    ],
)
def test_run_sync_decodes_what_is_not_an_event_yet(form: Callable[[Any], Any]) -> None:
    stages = agui_meta.DefaultStages()
    updates = agui_meta.run_sync(stages, [form(e) for e in WIRE])
    assert len(updates) == len(WIRE)
    assert stages.store.messages_wire()[0]["content"] == "Hi"
    assert stages.ledger.runs[0].status == "finished"


def test_run_sync_decodes_ag_ui_core_models() -> None:
    core = needs.module("ag_ui.core")
    stages = agui_meta.DefaultStages()
    models = [
        core.RunStartedEvent(thread_id="t", run_id="r"),
        core.TextMessageStartEvent(message_id="m", role="assistant"),
        core.TextMessageContentEvent(message_id="m", delta="Hi"),
        core.TextMessageEndEvent(message_id="m"),
        core.RunFinishedEvent(thread_id="t", run_id="r"),
    ]
    agui_meta.run_sync(stages, models)
    assert stages.store.messages_wire() == [{"id": "m", "role": "assistant", "content": "Hi"}]


def test_run_sync_reports_a_bad_dict_with_its_index() -> None:
    bad = [*WIRE[:2], {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 3}]
    with pytest.raises(agui_meta.DecodeError) as caught:
        agui_meta.run_sync(agui_meta.DefaultStages(), bad)
    assert caught.value.index == 2
    assert caught.value.path == "$.delta"


def test_run_sync_leaves_other_items_alone() -> None:
    class Double(agui_meta.Transducer[int, int]):
        def feed(self, item: int) -> None:
            self.emit(item)
            self.emit(item)

    assert agui_meta.run_sync([Double()], [1, 2]) == [1, 1, 2, 2]
