"""The pytest plugin (entry point ``pytest11``: installed with agui-meta, nothing to import).

The ``agui_validate`` fixture lints an agent's stream — an ``http(s)://`` URL, an ASGI app
(run in-process), recorded bytes, a ``Path`` or a list of events — as ``agui-meta validate``
does, and fails the test with every finding listed when there is an error (or a warning, with
``strict=True``)::

    def test_my_agent(agui_validate):
        findings = agui_validate(app, run_input={...})         # fails on errors
        assert "tool-call.arguments-not-json" not in findings.codes

    async def test_my_agent_async(agui_validate):                # in an async test
        await agui_validate.check(b"data: ...\\n\\n", strict=True)

Keyword arguments: ``run_input`` (the agent's run input), ``rules`` (``{code: severity}``,
``"off"`` drops a code), ``strict``, ``headers``, ``path`` (an ASGI app's endpoint),
``http_timeout``, ``keepalive_window``, ``buffered_after`` (see
:func:`agui_meta._validate.validate_stream`). An agent's transport is checked too: its status,
content type, a dropped connection, keepalives, buffering.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from ._exceptions import UsageError
from ._validate import Findings, validate_stream

__all__ = ["AguiValidate", "agui_validate"]


class AguiValidate:
    """What the ``agui_validate`` fixture gives: call it (sync test) or ``await .check``."""

    def __call__(self, source: Any, *, strict: bool = False, **options: Any) -> Findings:
        __tracebackhide__ = True
        if _in_event_loop():
            raise UsageError(
                "agui_validate(...) runs its own event loop: in an async test, "
                "use `await agui_validate.check(...)`"
            )

        async def run() -> Findings:
            return await validate_stream(source, **options)

        return self._verdict(anyio.run(run), strict)

    async def check(self, source: Any, *, strict: bool = False, **options: Any) -> Findings:
        """The same, awaited inside a running event loop."""
        __tracebackhide__ = True
        return self._verdict(await validate_stream(source, **options), strict)

    @staticmethod
    def _verdict(found: Findings, strict: bool) -> Findings:
        __tracebackhide__ = True
        if found.failed(strict):
            what = "errors or warnings (strict)" if strict else "errors"
            text = "\n".join(["", f"{found.summary()}: the stream has {what}", *found.lines()])
            raise AssertionError(text)
        return found


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def agui_validate() -> Iterator[AguiValidate]:
    """Lint an AG-UI stream (URL, ASGI app, bytes, Path, events); fail on its errors."""
    yield AguiValidate()
