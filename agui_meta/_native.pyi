from typing import Any

MAX_NESTING: int

def scan(data: bytes, /) -> bool: ...
def run_batch(
    payloads: list[bytes | None],
    k: int,
    number: bool,
    index: int,
    ctx: Any,
    typed_decode: Any,
    py_decode: Any,
    plans: dict[type, tuple[Any, Any]],
    tail: Any,
    note: list[type] | None,
    args_cls: type,
    unset: Any,
    /,
) -> tuple[int, Any, BaseException | None]: ...
