"""The recorded streams of ``examples/streams``, as the tests see them.

The events come from the generator itself (``examples/streams/make_streams.py``), not from
parsing the files with agui-meta, so that expectations never depend on the code under test;
``test_examples.py`` checks that the files are what the generator writes.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType
from typing import Any

from tests.oracle import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
STREAMS = EXAMPLES / "streams"
GOOD = {"travel.sse": "travel", "support.jsonl": "support"}


@cache
def generator() -> ModuleType:
    """``examples/streams/make_streams.py``, imported by path."""
    spec = importlib.util.spec_from_file_location("make_streams", STREAMS / "make_streams.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def events(name: str) -> list[dict[str, Any]]:
    """The events of a good stream (``travel.sse`` or ``support.jsonl``), as wire dicts."""
    gen = generator()
    if name == "travel.sse":
        result: list[dict[str, Any]] = gen.travel(gen.SEED)
    elif name == "support.jsonl":
        result = gen.support(gen.SEED + 1)
    else:
        raise KeyError(name)
    return result


def case(name: str) -> dict[str, Any]:
    """A good stream as a case of the oracle's format."""
    return {"name": name, "events": events(name)}
