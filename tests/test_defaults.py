"""DefaultStages(): the default pipeline as one object, with its store and ledger at hand."""

from __future__ import annotations

import pytest

import agui_meta
from tests import example_streams
from tests.oracle import OracleServer, assert_same_result


def test_the_stages_in_pipeline_order() -> None:
    stages = agui_meta.DefaultStages()
    kinds = [type(s) for s in stages]
    assert kinds == [
        agui_meta.ExpandChunks,
        agui_meta.Verify,
        agui_meta.Accumulate,
        agui_meta.Ledger,
    ]
    assert stages.accumulate.store is stages.store
    assert isinstance(stages.store, agui_meta.Store)
    assert "ExpandChunks, Verify, Accumulate, Ledger" in repr(stages)


def test_options_replace_or_leave_out_stages() -> None:
    store = agui_meta.Store([{"id": "u", "role": "user", "content": "hi"}])
    verifier = agui_meta.Verify(report_unfinished=True)
    runs: list[agui_meta.RunRecord] = []
    book = agui_meta.Ledger(on_run=runs.append)
    stages = agui_meta.DefaultStages(store, verify=verifier, ledger=book)
    assert list(stages) == [stages.expand_chunks, verifier, stages.accumulate, book]
    assert stages.store is store and stages.ledger is book
    unverified = agui_meta.DefaultStages(verify=False)
    assert unverified.verify is None
    assert [type(s) for s in unverified] == [
        agui_meta.ExpandChunks,
        agui_meta.Accumulate,
        agui_meta.Ledger,
    ]


def test_each_call_makes_new_stages() -> None:
    a, b = agui_meta.DefaultStages(), agui_meta.DefaultStages()
    assert not {id(s) for s in a} & {id(s) for s in b}


@pytest.mark.anyio
async def test_unverified_streams_pass_only_without_verify() -> None:
    events = [{"type": "TEXT_MESSAGE_START", "messageId": "m"}]  # no RUN_STARTED first
    with pytest.raises(agui_meta.VerifyError):
        async with agui_meta.wrap(events, *agui_meta.DefaultStages()) as stream:
            await stream.drain()
    stages = agui_meta.DefaultStages(verify=False)
    async with agui_meta.wrap(events, *stages) as stream:
        await stream.drain()
    assert stages.store.messages_wire() == [{"id": "m", "role": "assistant", "content": ""}]


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
async def test_a_recorded_stream_as_the_reference_client_builds_it(
    name: str, oracle: OracleServer
) -> None:
    case = example_streams.case(name)
    stages = agui_meta.DefaultStages()
    async with agui_meta.wrap(case["events"], *stages, mode="strict") as stream:
        async for update in stream:
            assert isinstance(update, agui_meta.Update)
    ours = {"name": name, "messages": stages.store.messages_wire(), "state": stages.store.state}
    assert_same_result(ours, oracle.run_one(case), case)
    runs = stages.ledger.runs
    finished = [e for e in case["events"] if e["type"] == "RUN_FINISHED"]
    assert [r.run_id for r in runs] == [e["runId"] for e in finished]
    assert all(r.status == "finished" for r in runs)
