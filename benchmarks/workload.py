"""Seeded generator of realistic AG-UI 1.0 agent traffic, for the benchmarks.

Each run of the stream is one agent turn: ``RUN_STARTED``, a step, often a reasoning span with
a streamed reasoning message, streamed assistant text in token-sized deltas, tool calls with
streamed JSON arguments and their results (then more text), state deltas, an activity card
with patches, now and then a ``CUSTOM`` or ``RAW`` event, and ``RUN_FINISHED`` with token
usage. About one event in ten carries ``metadata`` (trace ids, latencies), and every ``*_END``
event carries usage metadata. ``--chunked`` streams every text message, tool call and reasoning
message as ``*_CHUNK`` events instead. ``--history N`` puts a first run holding a
``MESSAGES_SNAPSHOT`` of N prior messages before the body (3 events more).

Every stream is valid for the reference client's ``verifyEvents`` (runs open and close
properly, every stream is closed before the run finishes), and ``--events`` is exact: the body
holds exactly that many events. The same seed gives the same bytes.

    python -m benchmarks.workload --events 10000 --format sse -o benchmarks/results/w.sse
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["encode", "events", "frames", "history_messages", "write"]

Event = dict[str, Any]

_ENCODE = msgspec.json.Encoder().encode

THREAD = "thread-1"

_WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "an",
    "at",
    "from",
    "which",
    "but",
    "not",
    "have",
    "has",
    "can",
    "will",
    "would",
    "should",
    "could",
    "we",
    "you",
    "they",
    "their",
    "there",
    "about",
    "into",
    "more",
    "than",
    "other",
    "some",
    "these",
    "only",
    "also",
    "when",
    "what",
    "where",
    "how",
    "why",
    "because",
    "while",
    "if",
    "then",
    "agent",
    "tool",
    "call",
    "result",
    "search",
    "query",
    "index",
    "file",
    "document",
    "page",
    "section",
    "table",
    "value",
    "model",
    "token",
    "stream",
    "event",
    "message",
    "state",
    "delta",
    "patch",
    "update",
    "plan",
    "step",
    "task",
    "review",
    "check",
    "verify",
    "assemble",
    "merge",
    "metadata",
    "protocol",
    "client",
    "server",
    "request",
    "response",
    "error",
    "retry",
    "latency",
    "cache",
    "memory",
    "store",
    "history",
    "context",
    "input",
    "output",
    "summary",
    "answer",
    "note",
    "first",
    "second",
    "next",
    "last",
    "new",
    "old",
    "same",
    "different",
    "important",
    "simple",
    "complex",
    "quick",
    "slow",
    "data",
    "report",
    "chart",
    "list",
    "item",
    "record",
    "field",
    "key",
    "name",
    "type",
    "id",
    "time",
    "date",
    "user",
    "system",
)
_PUNCT = (".", ",", ":", ";", "?", "!", "\n\n", "\n- ")
# Non-ASCII tokens appear now and then, as in real model output.
_RARE = (" café", " naïve", " —", " résumé", " 🙂", " 東京", " Zürich", " ½")
_TOOLS = ("search_web", "read_file", "run_sql", "get_weather", "create_ticket", "send_email")
_MODELS = ("gpt-4.1", "claude-sonnet-4", "gemini-2.5-pro")


def _token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.02:
        return rng.choice(_RARE)
    if r < 0.10:
        return rng.choice(_PUNCT)
    if r < 0.85:
        return " " + rng.choice(_WORDS)
    # Several tokens in one delta, or a word split in two deltas.
    if r < 0.95:
        return " " + rng.choice(_WORDS) + " " + rng.choice(_WORDS)
    return rng.choice(_WORDS)[:3]


def _hex(rng: random.Random, n: int = 16) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


class _Gen:
    """Builds turns; ids are unique across the whole stream."""

    def __init__(self, seed: int, chunked: bool) -> None:
        self.rng = random.Random(seed)
        self.chunked = chunked
        self.n = 0  # id counter
        self.run = 0
        self.state_seen = False

    def id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"

    # -- metadata --------------------------------------------------------------------------

    def meta(self, ev: Event) -> Event:
        """About one event in ten gets trace metadata."""
        rng = self.rng
        if rng.random() < 0.1:
            ev["metadata"] = {
                "acme.traceId": _hex(rng),
                "acme.latencyMs": rng.randint(1, 900),
            }
        return ev

    def usage_meta(self, ev: Event) -> Event:
        rng = self.rng
        inp, out = rng.randint(50, 4000), rng.randint(5, 800)
        ev["metadata"] = {
            "acme.usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
            "acme.finishReason": rng.choice(("stop", "stop", "stop", "length", "tool_calls")),
            "acme.model": rng.choice(_MODELS),
        }
        return ev

    # -- streamed items --------------------------------------------------------------------

    def text(self, k: int) -> list[Event]:
        """An assistant text message of ``k`` deltas (k + 2 events, or k chunks)."""
        mid = self.id("msg")
        rng = self.rng
        if self.chunked:
            out = [
                self.meta(
                    {
                        "type": "TEXT_MESSAGE_CHUNK",
                        "messageId": mid,
                        "role": "assistant",
                        "delta": _token(rng),
                    }
                )
            ]
            out += [
                self.meta({"type": "TEXT_MESSAGE_CHUNK", "messageId": mid, "delta": _token(rng)})
                for _ in range(k - 1)
            ]
            # The last chunk carries the usage, as the END would.
            self.usage_meta(out[-1])
            return out
        out = [self.meta({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})]
        out += [
            self.meta({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": _token(rng)})
            for _ in range(k)
        ]
        out.append(self.usage_meta({"type": "TEXT_MESSAGE_END", "messageId": mid}))
        return out

    def reasoning(self, k: int) -> list[Event]:
        """A reasoning span with one streamed reasoning message (k + 4 events, or k + 2)."""
        rid = self.id("rsn")
        rng = self.rng
        out = [self.meta({"type": "REASONING_START", "messageId": rid})]
        if self.chunked:
            out += [
                self.meta(
                    {"type": "REASONING_MESSAGE_CHUNK", "messageId": rid, "delta": _token(rng)}
                )
                for _ in range(k)
            ]
            self.usage_meta(out[-1])
        else:
            out.append(
                self.meta(
                    {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"}
                )
            )
            out += [
                self.meta(
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": _token(rng)}
                )
                for _ in range(k)
            ]
            out.append(self.usage_meta({"type": "REASONING_MESSAGE_END", "messageId": rid}))
        out.append(self.meta({"type": "REASONING_END", "messageId": rid}))
        return out

    def tool_call(self, parent: str | None, k: int) -> list[Event]:
        """A tool call with arguments in ``k`` fragments, then its result (k + 3, or k + 1)."""
        rng = self.rng
        cid = self.id("call")
        name = rng.choice(_TOOLS)
        args = _ENCODE(
            {
                "query": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12))),
                "limit": rng.randint(1, 50),
                "filters": {"lang": "en", "recent": rng.random() < 0.5},
            }
        ).decode()
        cuts = sorted(rng.sample(range(1, len(args)), min(k - 1, len(args) - 1)))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
        pieces += [""] * (k - len(pieces))  # very short arguments: empty fragments at the end
        out: list[Event] = []
        if self.chunked:
            first: Event = {"type": "TOOL_CALL_CHUNK", "toolCallId": cid, "toolCallName": name}
            if parent is not None:
                first["parentMessageId"] = parent
            first["delta"] = pieces[0]
            out.append(self.meta(first))
            out += [
                self.meta({"type": "TOOL_CALL_CHUNK", "toolCallId": cid, "delta": p})
                for p in pieces[1:]
            ]
            self.usage_meta(out[-1])
        else:
            start: Event = {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name}
            if parent is not None:
                start["parentMessageId"] = parent
            out.append(self.meta(start))
            out += [
                self.meta({"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": p}) for p in pieces
            ]
            out.append(self.usage_meta({"type": "TOOL_CALL_END", "toolCallId": cid}))
        result = _ENCODE(
            {
                "results": [
                    {
                        "title": " ".join(rng.choice(_WORDS) for _ in range(5)).title(),
                        "url": f"https://example.com/{_hex(rng, 8)}",
                        "snippet": " ".join(rng.choice(_WORDS) for _ in range(20)),
                    }
                    for _ in range(rng.randint(1, 3))
                ]
            }
        ).decode()
        out.append(
            self.meta(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": self.id("tool"),
                    "toolCallId": cid,
                    "content": result,
                    "role": "tool",
                }
            )
        )
        return out

    # -- turns -----------------------------------------------------------------------------

    def run_started(self) -> Event:
        self.run += 1
        return {
            "type": "RUN_STARTED",
            "threadId": THREAD,
            "runId": f"run-{self.run}",
            "timestamp": 1_760_000_000_000 + self.run * 1000,
        }

    def run_finished(self) -> Event:
        rng = self.rng
        inp, out = rng.randint(500, 20000), rng.randint(50, 3000)
        return {
            "type": "RUN_FINISHED",
            "threadId": THREAD,
            "runId": f"run-{self.run}",
            "timestamp": 1_760_000_000_000 + self.run * 1000 + 999,
            "usage": [
                {
                    "provider": "acme",
                    "model": rng.choice(_MODELS),
                    "inputTokens": inp,
                    "outputTokens": out,
                    "totalTokens": inp + out,
                }
            ],
            "metadata": {"acme.traceId": _hex(rng), "acme.costUsd": round(rng.random(), 4)},
        }

    def turn(self) -> list[Event]:
        """One realistic agent turn (typically 40 to 400 events)."""
        rng = self.rng
        ev: list[Event] = [self.run_started()]
        if not self.state_seen:
            self.state_seen = True
            ev.append(
                self.meta(
                    {
                        "type": "STATE_SNAPSHOT",
                        "snapshot": {
                            "status": "idle",
                            "step": 0,
                            "todos": [{"label": w, "done": False} for w in _WORDS[:5]],
                        },
                    }
                )
            )
        ev.append(self.meta({"type": "STEP_STARTED", "stepName": "plan"}))
        if rng.random() < 0.5:
            ev += self.reasoning(rng.randint(10, 80))
        ev.append(self.meta({"type": "STEP_FINISHED", "stepName": "plan"}))
        ev.append(self.meta({"type": "STEP_STARTED", "stepName": "act"}))
        text = self.text(rng.randint(5, 60))
        ev += text
        parent = text[0]["messageId"]
        if rng.random() < 0.6:
            for _ in range(rng.randint(1, 2)):
                ev += self.tool_call(parent if rng.random() < 0.8 else None, rng.randint(3, 20))
            if rng.random() < 0.3:
                ev.append(
                    self.meta(
                        {
                            "type": "STATE_DELTA",
                            "delta": [
                                {"op": "replace", "path": "/status", "value": "working"},
                                {"op": "replace", "path": "/step", "value": self.run},
                                {
                                    "op": "replace",
                                    "path": f"/todos/{rng.randint(0, 4)}/done",
                                    "value": True,
                                },
                            ],
                        }
                    )
                )
            ev += self.text(rng.randint(20, 200))
        if rng.random() < 0.3:
            aid = self.id("act")
            steps = rng.randint(2, 4)
            ev.append(
                self.meta(
                    {
                        "type": "ACTIVITY_SNAPSHOT",
                        "messageId": aid,
                        "activityType": "PLAN",
                        "content": {
                            "title": "Plan",
                            "steps": [
                                {"label": rng.choice(_WORDS), "status": "pending"}
                                for _ in range(steps)
                            ],
                        },
                    }
                )
            )
            ev += [
                self.meta(
                    {
                        "type": "ACTIVITY_DELTA",
                        "messageId": aid,
                        "activityType": "PLAN",
                        "patch": [{"op": "replace", "path": f"/steps/{i}/status", "value": "done"}],
                    }
                )
                for i in range(steps)
            ]
        if rng.random() < 0.1:
            ev.append(
                self.meta(
                    {
                        "type": "CUSTOM",
                        "name": "acme.progress",
                        "value": {"pct": rng.randint(0, 100)},
                    }
                )
            )
        if rng.random() < 0.05:
            ev.append(
                {"type": "RAW", "event": {"provider": "acme", "id": _hex(rng)}, "source": "acme"}
            )
        ev.append(self.meta({"type": "STEP_FINISHED", "stepName": "act"}))
        ev.append(self.run_finished())
        return ev

    def filler(self, n: int) -> list[Event]:
        """A turn of exactly ``n`` events (n >= 5): one text message."""
        text = self.text(n - 2 if self.chunked else n - 4)
        return [self.run_started(), *text, self.run_finished()]


def history_messages(n: int, seed: int = 0) -> list[Event]:
    """``n`` prior messages of a conversation (wire JSON): user, assistant (some with tool
    calls), tool results, now and then with metadata."""
    rng = random.Random(seed ^ 0x5EED)
    out: list[Event] = []
    i = 0
    while len(out) < n:
        i += 1
        kind = i % 4
        content = "".join(_token(rng) for _ in range(rng.randint(5, 40))).strip()
        if kind == 1:
            out.append({"id": f"h-{i}", "role": "user", "content": content})
        elif kind == 2 and len(out) + 2 <= n:
            cid = f"hc-{i}"
            out.append(
                {
                    "id": f"h-{i}",
                    "role": "assistant",
                    "content": content,
                    "toolCalls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": rng.choice(_TOOLS), "arguments": '{"q":"x"}'},
                        }
                    ],
                    "metadata": {"acme.model": rng.choice(_MODELS)},
                }
            )
            out.append(
                {"id": f"h-{i}-r", "role": "tool", "toolCallId": cid, "content": '{"ok":true}'}
            )
        else:
            out.append({"id": f"h-{i}", "role": "assistant", "content": content})
    return out


def events(n: int, *, seed: int = 1, chunked: bool = False, history: int = 0) -> Iterator[Event]:
    """The events of a workload, as wire dicts (lazily, so 1M events need little memory)."""
    if n < 5 and n != 0:
        raise ValueError("a workload holds 0 or at least 5 events")
    gen = _Gen(seed, chunked)
    if history:
        yield gen.run_started()
        yield {"type": "MESSAGES_SNAPSHOT", "messages": history_messages(history, seed)}
        yield gen.run_finished()
    remaining = n
    while remaining:
        turn = gen.turn()
        left = remaining - len(turn)
        if left < 0 or 0 < left < 5:
            turn = gen.filler(remaining)
        yield from turn
        remaining -= len(turn)


def encode(event: Event, fmt: str) -> bytes:
    """One event framed as SSE (``data: …`` and a blank line) or as a JSON line."""
    data = _ENCODE(event)
    if fmt == "sse":
        return b"data: " + data + b"\n\n"
    if fmt == "jsonl":
        return data + b"\n"
    raise ValueError(f"format must be 'sse' or 'jsonl', got {fmt!r}")


def frames(n: int, **kw: Any) -> list[bytes]:
    """The JSON text of every event of a workload (the payload of each SSE frame)."""
    return [_ENCODE(e) for e in events(n, **kw)]


def write(path: str | Path, n: int, fmt: str = "sse", **kw: Any) -> int:
    """Write a workload to ``path`` (streaming); returns the number of bytes written."""
    size = 0
    with open(path, "wb") as fh:
        buf: list[bytes] = []
        for event in events(n, **kw):
            buf.append(encode(event, fmt))
            if len(buf) >= 4096:
                size += fh.write(b"".join(buf))
                buf.clear()
        size += fh.write(b"".join(buf))
    return size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000, help="events in the body (exact)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--format", choices=("sse", "jsonl"), default="sse")
    p.add_argument("--chunked", action="store_true", help="stream items as *_CHUNK events")
    p.add_argument(
        "--history",
        type=int,
        default=0,
        help="prior messages, in a MESSAGES_SNAPSHOT of a first run (3 events more)",
    )
    p.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    a = p.parse_args(argv)
    kw = {"seed": a.seed, "chunked": a.chunked, "history": a.history}
    if a.output == "-":
        out = sys.stdout.buffer
        for event in events(a.events, **kw):
            out.write(encode(event, a.format))
    else:
        size = write(a.output, a.events, a.format, **kw)
        print(f"wrote {a.output}: {size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
