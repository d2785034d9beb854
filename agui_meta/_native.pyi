from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_NESTING: int

def scan(data: bytes, /) -> bool: ...
def shape(data: bytes, /) -> tuple[type, str, str, dict[str, Any] | None] | None: ...
def configure(
    update: type,
    message_item: type,
    tool_call_item: type,
    tool_call_args: type,
    unset: Any,
    deltas: tuple[type, ...],
    context: type,
    merged_metadata: type,
    metadata_writes: type,
    metadata_decode: Any,
    /,
) -> None: ...
def configure_steps(step_started: type, step_finished: type, step_record: type, /) -> None: ...
def configure_copy(fallback: Callable[[Any], Any], /) -> None: ...
def copy_json(value: Any, /) -> Any: ...
def new_list() -> list[Any]: ...
def new_ordered() -> OrderedDict[Any, Any]: ...
def untrack_message(item: Any, /) -> None: ...
def track_message(item: Any, /) -> None: ...
def patch_simple(root: Any, fresh: dict[int, Any], op: Any, /) -> Any: ...
def merge(existing: Any, incoming: Any, /) -> Any: ...
def run_batch(
    payloads: list[bytes | None],
    k: int,
    number: bool,
    index: int,
    ctx: Any,
    typed_decode: Any,
    py_decode: Any,
    plans: dict[type, tuple[Any, Any, int, Any]],
    tail: Any,
    note: dict[type, int] | None,
    rest: tuple[
        Any, list[Any], list[Any], list[dict[str, int]], dict[type, tuple[Any, ...]] | None, Any
    ]
    | tuple[
        Any,
        list[Any],
        list[Any],
        list[dict[str, int]],
        dict[type, tuple[Any, ...]] | None,
        Any,
        Any,
    ]
    | None,
    /,
) -> tuple[int, Any, BaseException | None, int, bool]: ...
def sse_run(chunk: bytes, limit: int, /) -> tuple[list[bytes], int] | None: ...
def jsonl_run(chunk: bytes, limit: int, /) -> tuple[list[bytes], int] | None: ...
