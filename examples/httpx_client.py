"""Consume an AG-UI endpoint with httpx: print each item as it completes, then token usage.

    python examples/server.py &                      # an AG-UI endpoint to talk to
    python examples/httpx_client.py http://127.0.0.1:8000/agent

The run input is POSTed as JSON, as AG-UI clients do, and the response body (SSE, or JSON
lines: told apart by its first bytes) goes straight into ``agui_meta.wrap()``. Items arrive
while the agent is still streaming; the store holds the whole conversation at the end.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

import anyio
import httpx

import agui_meta


def run_input(message: str) -> dict[str, Any]:
    """A minimal RunAgentInput: a new thread with one user message."""
    return {
        "threadId": f"thread-{uuid.uuid4().hex[:8]}",
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": [{"id": "user-1", "role": "user", "content": message}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


async def consume(url: str, body: dict[str, Any]) -> agui_meta.DefaultStages[agui_meta.Store]:
    """Stream one run from ``url``; print each completed item; return the stages."""
    stages = agui_meta.DefaultStages()
    # No read timeout: an agent may think for a while between two events.
    timeout = httpx.Timeout(10.0, read=None)
    async with (
        httpx.AsyncClient(timeout=timeout) as client,
        client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as response,
    ):
        response.raise_for_status()
        async with agui_meta.wrap(response.aiter_bytes(), *stages) as stream:
            async for update in stream:
                item = update.item
                if not update.done or item is None:
                    continue
                metadata = dict(update.metadata or {})
                if isinstance(item, agui_meta.ToolCallItem):
                    print(f"[tool call] {item.name}({item.arguments})  {json.dumps(metadata)}")
                else:
                    print(f"[{item.role}] {item.content}  {json.dumps(metadata)}")
    return stages


def print_usage(stages: agui_meta.DefaultStages[agui_meta.Store]) -> None:
    """The run ledger: outcome and token usage of each run."""
    for run in stages.ledger.runs:
        print(f"run {run.run_id}: {run.status}")
        for usage in run.aggregated_usage:
            # What the producer left out is None: say "-".
            label = "/".join(v if v is not None else "-" for v in (usage.provider, usage.model))
            counts = [
                v if v is not None else "-" for v in (usage.input_tokens, usage.output_tokens)
            ]
            print(f"  {label}: {counts[0]} in, {counts[1]} out")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the AG-UI endpoint, e.g. http://127.0.0.1:8000/agent")
    parser.add_argument("--message", default="What's the weather in Lisbon?")
    args = parser.parse_args(argv)
    stages = anyio.run(consume, args.url, run_input(args.message))
    print_usage(stages)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
