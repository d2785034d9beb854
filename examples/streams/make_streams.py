"""Write the recorded example streams of this folder (seeded: the output never changes).

    python examples/streams/make_streams.py [--out DIR]

- ``travel.sse``: a travel agent, as SSE: reasoning, text, two tool calls with streamed
  arguments and results, a plan shown as activity (snapshot, then patches), state snapshot and
  deltas, a step, a CUSTOM event; provider, model, latency, finish reason and token usage as
  vendor-prefixed metadata on START/END events, and usage on RUN_FINISHED.
- ``support.jsonl``: a support agent, as JSON lines, in two runs: ``*_CHUNK`` shorthand
  events, a subagent (its reasoning, text and tool call attributed by ``subagentRunId``), a run
  that stops on an interrupt, and a second run that resumes it.
- ``broken.jsonl``: a stream with deliberate defects, one of each kind ``agui-meta validate``
  finds (see ``DEFECTS`` below).

The two good streams are accepted by the reference client (``@ag-ui/client`` 1.0.0); the tests
check that, and that these files are what this script writes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20260514
T0 = 1_778_760_000_000  # the first event's timestamp (ms since the epoch)

Event = dict[str, Any]


class Recorder:
    """Collects events with increasing timestamps; splits text into random-sized deltas."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = T0
        self.events: list[Event] = []

    def add(self, type: str, **fields: Any) -> None:
        self.now += self.rng.randint(8, 90)
        self.events.append({"type": type, "timestamp": self.now, **fields})

    def pieces(self, text: str, low: int = 4, high: int = 14) -> list[str]:
        out = []
        while text:
            n = self.rng.randint(low, high)
            out.append(text[:n])
            text = text[n:]
        return out

    def latency(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# travel.sse


def travel(seed: int) -> list[Event]:
    r = Recorder(seed)
    run = {"threadId": "thread-lisbon", "runId": "run-1"}
    gpt = {"acme.provider": "openai", "acme.model": "gpt-4.1"}
    user = {
        "id": "u-1",
        "role": "user",
        "content": "Plan a long weekend in Lisbon for two, 14-17 May, flying from San Francisco.",
        "metadata": {"travelco.channel": "web", "travelco.locale": "en-US"},
    }
    r.add(
        "RUN_STARTED",
        **run,
        input={
            **run,
            "messages": [user],
            "tools": [
                {"name": "search_flights", "description": "Search return flights."},
                {"name": "get_weather", "description": "Daily forecast for a city."},
            ],
            "context": [],
            "state": {},
        },
        metadata={"travelco.request_id": "req-7f3a9c", "acme.trace_id": "tr-0b51e2"},
    )
    r.add("STATE_SNAPSHOT", snapshot={"trip": {"destination": "Lisbon", "travellers": 2}})
    r.add("STEP_STARTED", stepName="plan", metadata={"travelco.step_budget_ms": 20000})

    # Reasoning first, on a smaller model.
    r.add("REASONING_START", messageId="r-1")
    r.add(
        "REASONING_MESSAGE_START",
        messageId="r-1",
        role="reasoning",
        metadata={"acme.provider": "openai", "acme.model": "o4-mini"},
    )
    thought = (
        "Two travellers, Thursday to Sunday. I need flights SFO to LIS and the forecast "
        "before suggesting neighbourhoods: Alfama if it stays dry, museums if it rains."
    )
    for piece in r.pieces(thought, 8, 24):
        r.add("REASONING_MESSAGE_CONTENT", messageId="r-1", delta=piece)
    r.add(
        "REASONING_MESSAGE_END",
        messageId="r-1",
        metadata={"acme.latency_ms": r.latency(600, 1400), "acme.reasoning_tokens": 212},
    )
    r.add("REASONING_END", messageId="r-1")

    plan = {
        "steps": [
            {"title": "Find flights", "status": "in_progress"},
            {"title": "Check the weather", "status": "pending"},
            {"title": "Draft the itinerary", "status": "pending"},
        ]
    }
    r.add(
        "ACTIVITY_SNAPSHOT",
        messageId="plan-1",
        activityType="PLAN",
        content=plan,
        metadata={"travelco.widget": "checklist"},
    )

    r.add("TEXT_MESSAGE_START", messageId="m-1", role="assistant", metadata=gpt)
    for piece in r.pieces("Let me look up flights and the forecast for your dates."):
        r.add("TEXT_MESSAGE_CONTENT", messageId="m-1", delta=piece)
    r.add(
        "TEXT_MESSAGE_END",
        messageId="m-1",
        metadata={"acme.finish_reason": "tool_calls", "acme.latency_ms": r.latency(300, 900)},
    )

    calls = [
        (
            "call-flights",
            "search_flights",
            {
                "origin": "SFO",
                "destination": "LIS",
                "depart": "2026-05-14",
                "return": "2026-05-17",
                "passengers": 2,
            },
        ),
        ("call-weather", "get_weather", {"city": "Lisbon", "from": "2026-05-14", "days": 4}),
    ]
    for call_id, name, args in calls:
        r.add(
            "TOOL_CALL_START",
            toolCallId=call_id,
            toolCallName=name,
            parentMessageId="m-1",
            metadata={"acme.provider": "openai"},
        )
        for piece in r.pieces(dumps(args), 6, 18):
            r.add("TOOL_CALL_ARGS", toolCallId=call_id, delta=piece)
        r.add("TOOL_CALL_END", toolCallId=call_id, metadata={"acme.latency_ms": r.latency(80, 400)})

    flights = {
        "options": [
            {"carrier": "TP", "flight": "TP236", "depart": "2026-05-14T17:35", "price_usd": 742},
            {"carrier": "UA", "flight": "UA9912", "depart": "2026-05-14T13:10", "price_usd": 815},
        ]
    }
    r.add(
        "TOOL_CALL_RESULT",
        messageId="tool-1",
        toolCallId="call-flights",
        role="tool",
        content=dumps(flights),
        metadata={
            "travelco.source": "amadeus",
            "travelco.cache": "miss",
            "travelco.latency_ms": r.latency(900, 1800),
        },
    )
    r.add(
        "ACTIVITY_DELTA",
        messageId="plan-1",
        activityType="PLAN",
        patch=[
            {"op": "replace", "path": "/steps/0/status", "value": "done"},
            {"op": "replace", "path": "/steps/1/status", "value": "in_progress"},
        ],
        metadata={"travelco.progress": 0.34},
    )
    weather = {
        "daily": [
            {"date": "2026-05-14", "high_c": 22, "rain_mm": 0},
            {"date": "2026-05-15", "high_c": 24, "rain_mm": 0},
            {"date": "2026-05-16", "high_c": 19, "rain_mm": 6},
            {"date": "2026-05-17", "high_c": 21, "rain_mm": 1},
        ]
    }
    r.add(
        "TOOL_CALL_RESULT",
        messageId="tool-2",
        toolCallId="call-weather",
        role="tool",
        content=dumps(weather),
        metadata={"travelco.source": "open-meteo", "travelco.cache": "hit"},
    )
    r.add(
        "ACTIVITY_DELTA",
        messageId="plan-1",
        activityType="PLAN",
        patch=[
            {"op": "replace", "path": "/steps/1/status", "value": "done"},
            {"op": "replace", "path": "/steps/2/status", "value": "in_progress"},
        ],
        metadata={"travelco.progress": 0.67},
    )
    r.add(
        "STATE_DELTA",
        delta=[
            {"op": "add", "path": "/trip/flight", "value": "TP236"},
            {"op": "add", "path": "/trip/nights", "value": 3},
        ],
    )
    r.add("STEP_FINISHED", stepName="plan")
    r.add(
        "CUSTOM",
        name="travelco.price_alert",
        value={"flight": "TP236", "watch": True},
        metadata={"travelco.ttl_s": 86400},
    )

    itinerary = (
        "Here is a plan for 14-17 May:\n\n"
        "- **Thu**: TAP TP236 lands Friday morning; check in around Baixa.\n"
        "- **Fri** (24 °C, dry): Alfama and the Castelo de São Jorge, fado in the evening.\n"
        "- **Sat** (rain likely): the Gulbenkian and MAAT, pastéis de nata in Belém.\n"
        "- **Sun**: LX Factory brunch, then the airport.\n\n"
        "Flights are $742 per person; shall I hold seats?"
    )
    r.add("TEXT_MESSAGE_START", messageId="m-2", role="assistant", metadata=gpt)
    for piece in r.pieces(itinerary):
        r.add("TEXT_MESSAGE_CONTENT", messageId="m-2", delta=piece)
    r.add(
        "TEXT_MESSAGE_END",
        messageId="m-2",
        metadata={
            "acme.finish_reason": "stop",
            "acme.latency_ms": r.latency(1500, 3200),
            "acme.usage": {"inputTokens": 1874, "outputTokens": 163},
        },
    )
    r.add(
        "ACTIVITY_DELTA",
        messageId="plan-1",
        activityType="PLAN",
        patch=[{"op": "replace", "path": "/steps/2/status", "value": "done"}],
        metadata={"travelco.progress": 1.0},
    )
    r.add(
        "RUN_FINISHED",
        **run,
        outcome={"type": "success"},
        usage=[
            {
                "provider": "openai",
                "model": "gpt-4.1",
                "inputTokens": 3120,
                "outputTokens": 241,
                "totalTokens": 3361,
                "cachedInputTokens": 1024,
            },
            {
                "provider": "openai",
                "model": "o4-mini",
                "inputTokens": 412,
                "outputTokens": 260,
                "totalTokens": 672,
                "reasoningTokens": 212,
            },
        ],
        metadata={"travelco.cost_usd": 0.0131, "acme.trace_id": "tr-0b51e2"},
    )
    return r.events


# ---------------------------------------------------------------------------------------------
# support.jsonl


def support(seed: int) -> list[Event]:
    r = Recorder(seed)
    thread = "thread-support"
    sonnet = {"anthropic.model": "claude-sonnet-4"}
    haiku = {"anthropic.model": "claude-haiku-4"}
    sa = "sa-returns"

    # Run 1: chunks, a subagent, and an interrupt at the end.
    run_a = {"threadId": thread, "runId": "run-a"}
    r.add(
        "RUN_STARTED",
        **run_a,
        input={
            **run_a,
            "messages": [
                {
                    "id": "u-1",
                    "role": "user",
                    "content": "Order #4821 arrived damaged. Can I get a replacement?",
                }
            ],
            "tools": [],
            "context": [],
        },
        metadata={"helpdesk.ticket": "HD-5531"},
    )
    first = r.pieces("I'm sorry to hear that. Let me pull up the order.")
    r.add(
        "TEXT_MESSAGE_CHUNK",
        messageId="s-m1",
        role="assistant",
        delta=first[0],
        metadata=sonnet,
    )
    for piece in first[1:]:
        r.add("TEXT_MESSAGE_CHUNK", delta=piece)  # no id: continues the open message
    args = r.pieces(dumps({"order_id": "4821"}), 5, 9)
    r.add(
        "TOOL_CALL_CHUNK",  # opening a tool call closes the text message
        toolCallId="tc-order",
        toolCallName="lookup_order",
        parentMessageId="s-m1",
        delta=args[0],
        metadata={"anthropic.tool_use_id": "toolu_01"},
    )
    for piece in args[1:]:
        r.add("TOOL_CALL_CHUNK", toolCallId="tc-order", delta=piece)
    r.add(
        "TOOL_CALL_RESULT",
        messageId="tool-order",
        toolCallId="tc-order",
        content=dumps({"order_id": "4821", "item": "ceramic teapot", "status": "delivered"}),
        metadata={"helpdesk.latency_ms": r.latency(40, 200)},
    )

    # A subagent takes over the return.
    r.add(
        "SUBAGENT_STARTED",
        subagentRunId=sa,
        name="returns-specialist",
        description="Handles returns and replacements",
        parentMessageId="s-m1",
        metadata=haiku,
    )
    for piece in r.pieces("Damaged on delivery: eligible for a free replacement.", 10, 20):
        r.add("REASONING_MESSAGE_CHUNK", messageId="sa-r1", delta=piece, subagentRunId=sa)
    reply = r.pieces("I can send a replacement teapot and a prepaid return label.")
    r.add(
        "TEXT_MESSAGE_CHUNK",
        messageId="sa-m1",
        delta=reply[0],
        subagentRunId=sa,
        metadata=haiku,
    )
    for piece in reply[1:]:
        r.add("TEXT_MESSAGE_CHUNK", messageId="sa-m1", delta=piece, subagentRunId=sa)
    r.add(
        "TOOL_CALL_START",  # an explicit event closes the subagent's open chunk stream
        toolCallId="tc-label",
        toolCallName="create_return_label",
        parentMessageId="sa-m1",
        subagentRunId=sa,
        metadata={"anthropic.tool_use_id": "toolu_02"},
    )
    for piece in r.pieces(dumps({"order_id": "4821", "carrier": "UPS"}), 6, 12):
        r.add("TOOL_CALL_ARGS", toolCallId="tc-label", delta=piece, subagentRunId=sa)
    r.add(
        "TOOL_CALL_END",
        toolCallId="tc-label",
        subagentRunId=sa,
        metadata={"helpdesk.latency_ms": r.latency(100, 500)},
    )
    r.add(
        "TOOL_CALL_RESULT",
        messageId="tool-label",
        toolCallId="tc-label",
        content=dumps({"label_url": "https://labels.example/4821.pdf"}),
        subagentRunId=sa,
    )
    r.add(
        "SUBAGENT_FINISHED",
        subagentRunId=sa,
        result={"replacement": True, "label": "4821.pdf"},
        outcome={"type": "success"},
        metadata={"helpdesk.latency_ms": r.latency(2000, 4000)},
    )
    confirm = r.pieces("A replacement is ready to ship. Should it go to the same address?")
    r.add("TEXT_MESSAGE_CHUNK", messageId="s-m2", delta=confirm[0], metadata=sonnet)
    for piece in confirm[1:]:
        r.add("TEXT_MESSAGE_CHUNK", messageId="s-m2", delta=piece)
    r.add(
        "RUN_FINISHED",  # closes the open chunk stream, then stops on an interrupt
        **run_a,
        outcome={
            "type": "interrupt",
            "interrupts": [
                {
                    "id": "int-address",
                    "reason": "confirmation_required",
                    "message": "Confirm the shipping address for the replacement.",
                    "metadata": {"helpdesk.form": "address-confirm"},
                }
            ],
        },
        usage=[
            {
                "provider": "anthropic",
                "model": "claude-sonnet-4",
                "inputTokens": 2210,
                "outputTokens": 118,
                "totalTokens": 2328,
            },
            {
                "provider": "anthropic",
                "model": "claude-haiku-4",
                "inputTokens": 940,
                "outputTokens": 96,
                "totalTokens": 1036,
            },
        ],
        metadata={"helpdesk.ticket": "HD-5531", "helpdesk.cost_usd": 0.0094},
    )

    # Run 2: the user answers the interrupt.
    run_b = {"threadId": thread, "runId": "run-b"}
    r.add(
        "RUN_STARTED",
        **run_b,
        input={
            **run_b,
            "messages": [{"id": "u-2", "role": "user", "content": "Yes, same address please."}],
            "tools": [],
            "context": [],
            "resume": [
                {"interruptId": "int-address", "status": "resolved", "payload": {"same": True}}
            ],
        },
    )
    done = r.pieces("Done: the replacement ships tomorrow, tracking to follow by email.")
    r.add("TEXT_MESSAGE_CHUNK", messageId="s-m3", delta=done[0], metadata=sonnet)
    for piece in done[1:]:
        r.add("TEXT_MESSAGE_CHUNK", messageId="s-m3", delta=piece)
    r.add(
        "RUN_FINISHED",
        **run_b,
        usage=[
            {
                "provider": "anthropic",
                "model": "claude-sonnet-4",
                "inputTokens": 2460,
                "outputTokens": 31,
                "totalTokens": 2491,
            },
        ],
        metadata={"helpdesk.ticket": "HD-5531"},
    )
    return r.events


# ---------------------------------------------------------------------------------------------
# broken.jsonl

#: line number (1-based) -> what is wrong with it, as ``agui-meta validate`` should say.
DEFECTS = {
    2: "unknown property 'colour' (stripped) and an unprefixed metadata key 'provider'",
    4: "TEXT_MESSAGE_CONTENT for a message that was never started",
    5: "metadata is null",
    6: "delta is a number",
    7: "not JSON",
    8: "an unknown event type",
    12: "RUN_FINISHED while a tool call is still open",
}
#: The lines of DEFECTS that are errors (the others are warnings).
ERROR_LINES = (4, 5, 6, 7, 12)


def broken(seed: int) -> list[str]:
    r = Recorder(seed)
    run = {"threadId": "thread-broken", "runId": "run-x"}
    r.add("RUN_STARTED", **run)  # 1
    r.add(  # 2
        "TEXT_MESSAGE_START",
        messageId="m-1",
        role="assistant",
        colour="blue",
        metadata={"provider": "openai", "acme.model": "gpt-4.1"},
    )
    r.add("TEXT_MESSAGE_CONTENT", messageId="m-1", delta="Hello")  # 3
    r.add("TEXT_MESSAGE_CONTENT", messageId="m-9", delta="lost")  # 4
    r.add("TOOL_CALL_START", toolCallId="call-1", toolCallName="lookup", metadata=None)  # 5
    r.add("TEXT_MESSAGE_CONTENT", messageId="m-1", delta=42)  # 6
    lines = [dumps(e) for e in r.events]
    lines.append('{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-1", "delta": "oops"')  # 7
    r.events.clear()
    r.add("TELEPORT", destination="Mars")  # 8
    r.add("TEXT_MESSAGE_END", messageId="m-1", metadata={"acme.finish_reason": "stop"})  # 9
    r.add("TOOL_CALL_START", toolCallId="call-2", toolCallName="get_weather")  # 10
    r.add("TOOL_CALL_ARGS", toolCallId="call-2", delta='{"city":')  # 11
    r.add("RUN_FINISHED", **run)  # 12
    lines.extend(dumps(e) for e in r.events)
    return lines


# ---------------------------------------------------------------------------------------------


def render() -> dict[str, bytes]:
    """The content of every file, by name."""
    sse = "".join(f"id: {i}\ndata: {dumps(e)}\n\n" for i, e in enumerate(travel(SEED), 1))
    return {
        "travel.sse": (": a travel agent, recorded by make_streams.py\n\n" + sse).encode(),
        "support.jsonl": "".join(dumps(e) + "\n" for e in support(SEED + 1)).encode(),
        "broken.jsonl": "".join(line + "\n" for line in broken(SEED + 2)).encode(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: here)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in render().items():
        (args.out / name).write_bytes(data)
        print(f"{args.out / name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
