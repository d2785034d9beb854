"""RFC 6902 JSON Patch, applied all-or-nothing with the reference client's exact semantics.

The reference reducer applies STATE_DELTA and ACTIVITY_DELTA with fast-json-patch 3.1.1
(``applyPatch(doc, ops, validate=true, mutate=false)``): every operation is validated against
the document as it stands, the first failure abandons the whole patch, and the original is never
modified. :func:`apply_patch` reproduces that behaviour, quirks included, because results must
equal the reference's:

- ``replace``/``remove`` need an existing target; ``add`` needs an existing parent and accepts
  an array index up to the length (``-`` appends); ``test`` compares with JavaScript's
  deep equality (``1 == 1.0``, but ``true != 1``);
- array indices are unsigned decimal strings; leading zeros are accepted where the path is not
  required to exist (``add`` at ``/a/01`` inserts at 1), the empty string counts as index 0, and
  an index is truncated to 32 bits as JavaScript's ``~~`` does;
- ``copy`` and ``move`` do not check the array bound of their target (an index past the end
  appends); a path through ``__proto__`` (or ``constructor/prototype``) is refused;
- names inherited by every JavaScript object (``toString``, ``constructor`` …) exist as far as
  validation is concerned: ``replace``/``remove`` of them on an object that lacks them succeed;
- the checks against the document are skipped while the document is falsy in JavaScript
  (``false``, ``0``, ``""``, ``null``): ``remove`` of ``/a`` on ``false`` succeeds and changes
  nothing, as ``add`` there does.

Why not the ``jsonpatch`` package: on the reference's own edge cases it disagrees with it (array
indices with leading zeros, the empty index and 32-bit truncation; ``move``/``copy`` past the end
of an array; inherited names; ``__proto__``; ``remove`` of the root — 11 of 506 differential
cases), and it deep-copies the whole document for every patch (``copy.deepcopy``: 230 ms for a
one-key change of a 10 000-key state, against 0.3 ms here).
This module copies on write instead: only the containers on the paths an operation touches are
shallow-copied (each at most once per patch), everything else is shared with the previous
document, which is left untouched. A delta touching one key of a large state therefore costs
the size of the containers on that path, not the size of the state; a failed patch costs nothing
but the copies made before the failure.

Two degenerate operations are refused where fast-json-patch goes astray: a root ``move``/``copy``
from a missing path (it leaves the document ``undefined``) and a ``move``/``copy`` whose
``from`` has a non-numeric array index (it skips that check and splices index 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from . import _speedups

__all__ = ["DOCUMENT_DEPTH", "PatchError", "apply_patch", "js_equal"]

#: The most levels of containers a patched document may hold: a snapshot's value sits at level 2
#: of its event (``{"type": …, "snapshot": {…}}``), and an event may nest
#: :data:`~agui_meta.MAX_NESTING` (128) levels.
DOCUMENT_DEPTH: Final = 127


class PatchError(Exception):
    """An operation that cannot be applied (the reference warns and keeps the old document).

    ``name`` is fast-json-patch's error name (``"TEST_OPERATION_FAILED"`` …) and ``index`` the
    position of the failing operation in the patch.
    """

    def __init__(self, message: str, name: str, index: int) -> None:
        self.name = name
        self.index = index
        super().__init__(f"{message} (operation {index}, {name})")


class _Undefined:
    """JavaScript's ``undefined``: what a lookup of a missing property gives."""

    __slots__ = ()


class _Function:
    """A property every JavaScript object inherits (``toString`` …): defined, but no JSON."""

    __slots__ = ()


_UNDEFINED = _Undefined()
_FUNCTION = _Function()
_OPS = frozenset(("add", "remove", "replace", "move", "copy", "test"))
#: Properties found on every object through Object.prototype (``__proto__`` is refused earlier).
_INHERITED = frozenset(
    (
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
    )
)


def _is_digits(key: str) -> bool:
    # fast-json-patch's isInteger: every character a decimal digit (so "" qualifies).
    return key == "" or (key.isascii() and key.isdigit())


def _to_int32(key: str) -> int:
    # JavaScript's ~~key for a digit string: ToNumber (a double), then ToInt32.
    if key == "":
        return 0
    number = float(key)
    if number == float("inf"):
        return 0
    n = int(number) % 2**32
    return n - 2**32 if n >= 2**31 else n


def _canonical_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and (key == "0" or key[0] != "0")


#: More digits than any length a Python container can have: such an index is past the end.
#: (Checked before ``int()``, whose conversion of producer text longer than the interpreter's
#: int-string limit, 4,300 digits by default, raises ``ValueError``.)
_MAX_INDEX_DIGITS = 19


def _within(key: str, length: int) -> bool:
    """Whether the canonical index ``key`` is below ``length``, for a key of any length."""
    return len(key) < _MAX_INDEX_DIGITS and int(key) < length


def _lookup(obj: Any, key: str) -> Any:
    """``obj[key]`` with JavaScript's property semantics (key is a string)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        return _FUNCTION if key in _INHERITED else _UNDEFINED
    if isinstance(obj, list):
        if _canonical_index(key) and _within(key, len(obj)):
            return obj[int(key)]
        if key == "length":
            return len(obj)
        return _FUNCTION if key in _INHERITED else _UNDEFINED
    if obj is None:
        raise TypeError(f"Cannot read properties of null (reading '{key}')")
    if isinstance(obj, str):
        if _canonical_index(key) and _within(key, len(obj)):
            return obj[int(key)]
        if key == "length":
            return len(obj)
    if isinstance(obj, (_Undefined, _Function)):
        raise TypeError(f"Cannot read properties of undefined (reading '{key}')")
    return _FUNCTION if key in _INHERITED else _UNDEFINED


def _js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a JSON value: false, 0, "" and null are falsy."""
    if value is None or value is False or value == "":
        return False
    return not (type(value) in (int, float) and value == 0)


def _is_object(value: Any) -> bool:
    # `!obj || typeof obj !== "object"`, negated: a non-null object or array.
    return isinstance(value, (dict, list))


def js_equal(a: Any, b: Any) -> bool:
    """fast-json-patch's deep equality on JSON values (numbers by value; booleans are not 0/1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(js_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(k in b and js_equal(v, b[k]) for k, v in a.items())
    return a is b and a is None


def _splice_index(start: int, length: int) -> int:
    # Array.prototype.splice's handling of its start argument.
    if start < 0:
        return max(length + start, 0)
    return min(start, length)


def _unescape(key: str) -> str:
    return key.replace("~1", "/").replace("~0", "~") if "~" in key else key


class _TooDeep(Exception):
    """A value would take the document past its depth limit."""


def _copy_within(value: Any, budget: int) -> Any:
    """:func:`copy_json` of ``value``, refusing one more than ``budget`` containers deep."""
    if isinstance(value, dict):
        if budget <= 0:
            raise _TooDeep
        budget -= 1
        return {
            k: _copy_within(v, budget) if isinstance(v, (dict, list)) else v
            for k, v in value.items()
        }
    if isinstance(value, list):
        if budget <= 0:
            raise _TooDeep
        budget -= 1
        return [_copy_within(v, budget) if isinstance(v, (dict, list)) else v for v in value]
    return value


def _check_within(value: Any, budget: int) -> None:
    """Raise :class:`_TooDeep` if ``value`` nests more than ``budget`` containers deep."""
    if isinstance(value, (dict, list)):
        if budget <= 0:
            raise _TooDeep
        budget -= 1
        for v in value.values() if isinstance(value, dict) else value:
            if isinstance(v, (dict, list)):
                _check_within(v, budget)


def _segments(path: str) -> int:
    """How many levels below the root a JSON Pointer points (``""`` is the root: 0)."""
    return path.count("/")


#: The C core's _Patcher._simple for a value that is not a container (``_patch.h``): the new
#: root, or None when the Python path decides (``None`` when the C core is not in use).
_NATIVE_SIMPLE: Callable[[Any, dict[int, Any], Any], Any] | None = (
    None if _speedups.NATIVE is None else _speedups.NATIVE.patch_simple
)


class _Patcher:
    """Applies operations to ``root``, copying each container it mutates once (copy on write).

    ``limit`` is the most levels of containers the document may hold (the root container is
    level 1); a value that would take it deeper fails its operation (``TOO_DEEP``).
    """

    __slots__ = ("fresh", "index", "limit", "root")

    def __init__(self, root: Any, limit: int) -> None:
        self.root = root
        self.index = 0
        self.limit = limit
        # Containers created during this patch, by id (kept alive here, so ids stay unique).
        self.fresh: dict[int, Any] = {}

    def _fail(self, message: str, name: str) -> PatchError:
        return PatchError(message, name, self.index)

    def _too_deep(self) -> PatchError:
        return self._fail(
            f"the operation would nest the document more than {self.limit} levels deep",
            "TOO_DEEP",
        )

    def _value(self, op: Mapping[str, Any]) -> Any:
        """A copy of ``op["value"]``, to be placed at ``op["path"]`` within the depth limit."""
        try:
            return _copy_within(op["value"], self.limit - _segments(op["path"]))
        except _TooDeep:
            raise self._too_deep() from None

    def _own(self, obj: Any, parent: Any, key: Any) -> Any:
        """A private copy of container ``obj`` (found at ``parent[key]``), linked into the tree."""
        if id(obj) in self.fresh or not isinstance(obj, (dict, list)):
            return obj
        copy: Any = dict(obj) if isinstance(obj, dict) else list(obj)
        self.fresh[id(copy)] = copy
        if parent is None:
            self.root = copy
        else:
            parent[key] = copy
        return copy

    # -- validation of one operation on its own (fast-json-patch's validator without a document)

    def _check_shape(self, op: Any) -> None:
        if not isinstance(op, dict):
            raise self._fail("Operation is not an object", "OPERATION_NOT_AN_OBJECT")
        kind = op.get("op")
        if kind not in _OPS:
            raise self._fail(
                "Operation `op` property is not one of operations defined in RFC-6902",
                "OPERATION_OP_INVALID",
            )
        path = op.get("path")
        if not isinstance(path, str):
            raise self._fail("Operation `path` property is not a string", "OPERATION_PATH_INVALID")
        if path and not path.startswith("/"):
            raise self._fail(
                'Operation `path` property must start with "/"', "OPERATION_PATH_INVALID"
            )
        if kind in ("move", "copy") and not isinstance(op.get("from"), str):
            raise self._fail(
                "Operation `from` property is not present (applicable in `move` and `copy` "
                "operations)",
                "OPERATION_FROM_REQUIRED",
            )
        if kind in ("add", "replace", "test") and "value" not in op:
            raise self._fail(
                "Operation `value` property is not present (applicable in `add`, `replace` and "
                "`test` operations)",
                "OPERATION_VALUE_REQUIRED",
            )

    def _check_against(self, op: Mapping[str, Any], kind: str, existing: str) -> None:
        """The validator's document checks, given the longest existing prefix of the path."""
        path: str = op["path"]
        if kind == "add":
            length, existing_length = path.count("/") + 1, existing.count("/") + 1
            if length not in (existing_length, existing_length + 1):
                raise self._fail(
                    "Cannot perform an `add` operation at the desired path",
                    "OPERATION_PATH_CANNOT_ADD",
                )
        elif kind in ("replace", "remove", "_get"):
            if path != existing:
                raise self._fail(
                    "Cannot perform the operation at a path that does not exist",
                    "OPERATION_PATH_UNRESOLVABLE",
                )
        elif kind in ("move", "copy"):
            try:
                self._walk({"op": "_get", "path": op["from"]}, validate=True)
            except PatchError as exc:
                if exc.name == "OPERATION_PATH_UNRESOLVABLE":
                    raise self._fail(
                        "Cannot perform the operation from a path that does not exist",
                        "OPERATION_FROM_UNRESOLVABLE",
                    ) from None
                # fast-json-patch ignores the other validation errors of `from` here (and then
                # misbehaves); refusing the operation is the sane reading.
                raise

    # -- one operation

    def apply(self, op: Any, index: int) -> None:
        self.index = index
        if _NATIVE_SIMPLE is not None:
            root = _NATIVE_SIMPLE(self.root, self.fresh, op)
            if root is not None:
                self.root = root
                return
        if self._simple(op):
            return
        self._check_shape(op)
        kind = op["op"]
        if op["path"] == "":
            self._apply_root(op, kind)
        else:
            self._walk(op, validate=True)

    def _simple(self, op: Any) -> bool:
        """The commonest operation, done in one walk: ``replace`` of a location that exists, or
        ``add`` of a member of an object that exists, the path's keys plain (no ``~``, no
        ``__proto__``/``prototype``, array indices canonical and within the array). Exactly
        what :meth:`_walk` does for it (every check it makes passes); False, nothing done, for
        anything else."""
        if type(op) is not dict:
            return False
        kind = op.get("op")
        if kind != "replace" and kind != "add":
            return False
        path = op.get("path")
        if type(path) is not str or path[:1] != "/" or "~" in path or "value" not in op:
            return False
        keys: list[Any] = path[1:].split("/")
        last = len(keys) - 1
        # First the proof, changing nothing: every container on the path exists (kept, with
        # the key into it, an array's index made an int).
        chain: list[Any] = []
        obj: Any = self.root
        for i, key in enumerate(keys):
            if key == "__proto__" or key == "prototype":
                return False
            if isinstance(obj, dict):
                if key not in obj and (i != last or kind != "add"):
                    return False
            elif isinstance(obj, list):
                if i == last and kind == "add":
                    return False  # an array's add inserts: the general walk's
                if not (key.isdigit() and key.isascii() and (key == "0" or key[0] != "0")):
                    return False
                if len(key) >= _MAX_INDEX_DIGITS or int(key) >= len(obj):
                    return False
                keys[i] = key = int(key)
            else:
                return False
            chain.append(obj)
            if i != last:
                obj = obj[key]
        value = op["value"]
        if isinstance(value, (dict, list)):
            value = self._value(op)
        # Then the copies on write along the path (each container at most once per patch),
        # and the write.
        fresh = self.fresh
        parent: Any = None
        for i, obj in enumerate(chain):
            if id(obj) not in fresh:
                obj = dict(obj) if isinstance(obj, dict) else list(obj)
                fresh[id(obj)] = obj
                if parent is None:
                    self.root = obj
                else:
                    parent[keys[i - 1]] = obj
            parent = obj
        parent[keys[last]] = value
        return True

    def _apply_root(self, op: Mapping[str, Any], kind: str) -> None:
        if kind in ("add", "replace"):
            self.root = self._value(op)
        elif kind in ("move", "copy"):
            value = self._walk({"op": "_get", "path": op["from"]}, validate=False)
            if isinstance(value, (_Undefined, _Function)):
                # The reference would leave the document `undefined`; refuse instead.
                raise self._fail(
                    "Cannot move or copy from a missing value", "OPERATION_FROM_MISSING"
                )
            self.root = value
        elif kind == "test":
            if not js_equal(self.root, op["value"]):
                raise self._fail("Test operation failed", "TEST_OPERATION_FAILED")
        else:  # remove
            self.root = None

    def _walk(self, op: Mapping[str, Any], *, validate: bool) -> Any:
        """fast-json-patch's applyOperation for a non-root path; returns a `_get`'s value."""
        kind: str = op["op"]
        path: str = op["path"]
        if path == "":
            return self.root
        keys = path.split("/")
        n = len(keys)
        mutate = kind in ("add", "remove", "replace", "move", "copy")
        parent: Any = None
        parent_key: Any = None
        obj = self.root
        existing: str | None = None
        t = 1
        while True:
            key: Any = _unescape(keys[t])
            if key == "__proto__" or (key == "prototype" and keys[t - 1] == "constructor"):
                raise TypeError(
                    "JSON-Patch: modifying `__proto__` or `constructor/prototype` prop is banned"
                )
            if validate and existing is None:
                if _lookup(obj, key) is _UNDEFINED:
                    existing = "/".join(keys[:t])
                elif t == n - 1:
                    existing = path
                if existing is not None and _js_truthy(self.root):
                    # fast-json-patch checks against the document only when it is truthy
                    # (`else if (document)`): on false, 0, "" or null it lets the op through.
                    self._check_against(op, kind, existing)
            t += 1
            if mutate and kind not in ("move", "copy"):
                obj = self._own(obj, parent, parent_key)
            if isinstance(obj, list):
                if key == "-":
                    key = len(obj)
                elif _is_digits(key):
                    key = _to_int32(key)
                elif validate:
                    raise self._fail(
                        "Expected an unsigned base-10 integer value, making the new referenced "
                        "value the array element with the zero-based index",
                        "OPERATION_PATH_ILLEGAL_ARRAY_INDEX",
                    )
                if t >= n:
                    if validate and kind == "add" and isinstance(key, int) and key > len(obj):
                        raise self._fail(
                            "The specified index MUST NOT be greater than the number of elements "
                            "in the array",
                            "OPERATION_VALUE_OUT_OF_BOUNDS",
                        )
                    return self._leaf_array(op, kind, obj, key)
            elif t >= n:
                return self._leaf_object(op, kind, obj, key)
            parent, parent_key = obj, key
            if isinstance(obj, list):
                obj = obj[key] if isinstance(key, int) and 0 <= key < len(obj) else _UNDEFINED
            else:
                obj = _lookup(obj, key)
            if validate and t < n and not _is_object(obj):
                raise self._fail(
                    "Cannot perform operation at the desired path", "OPERATION_PATH_UNRESOLVABLE"
                )

    def _leaf_object(self, op: Mapping[str, Any], kind: str, obj: Any, key: str) -> Any:
        if kind in ("move", "copy"):
            return self._move_or_copy(op, kind)
        if kind == "_get":
            return _lookup(obj, key)
        if kind == "test":
            if not js_equal(_lookup(obj, key), op["value"]):
                raise self._fail("Test operation failed", "TEST_OPERATION_FAILED")
            return None
        if not isinstance(obj, dict):
            if obj is None or isinstance(obj, (_Undefined, _Function)):
                raise TypeError(f"Cannot set properties of undefined (setting '{key}')")
            return None  # a property of a primitive: silently not set (sloppy mode)
        if kind == "remove":
            obj.pop(key, None)
        else:  # add, replace
            obj[key] = self._value(op) if "value" in op else op.get("_moved")
        return None

    def _leaf_array(self, op: Mapping[str, Any], kind: str, arr: list[Any], key: Any) -> Any:
        if kind in ("move", "copy"):
            return self._move_or_copy(op, kind)
        if not isinstance(key, int):
            # An array property (not an element): invisible in JSON.
            return _UNDEFINED if kind == "_get" else None
        inside = 0 <= key < len(arr)
        if kind == "_get":
            return arr[key] if inside else _UNDEFINED
        if kind == "test":
            if not js_equal(arr[key] if inside else _UNDEFINED, op["value"]):
                raise self._fail("Test operation failed", "TEST_OPERATION_FAILED")
            return None
        if kind == "add":
            value = self._value(op) if "value" in op else op.get("_moved")
            arr.insert(_splice_index(key, len(arr)), value)
        elif kind == "remove":
            start = _splice_index(key, len(arr))
            if start < len(arr):
                del arr[start]
        elif inside:  # replace (validation guarantees the element exists)
            arr[key] = self._value(op)
        return None

    def _move_or_copy(self, op: Mapping[str, Any], kind: str) -> None:
        source: str = op["from"]
        budget = self.limit - _segments(op["path"])
        if kind == "copy":
            value = self._walk({"op": "_get", "path": source}, validate=False)
            try:
                value = _copy_within(value, budget)
            except _TooDeep:
                raise self._too_deep() from None
        else:
            value = self._walk({"op": "_get", "path": source}, validate=False)
            if _segments(op["path"]) > _segments(source):  # moved deeper: check its height
                try:
                    _check_within(value, budget)
                except _TooDeep:
                    raise self._too_deep() from None
            self._walk({"op": "remove", "path": source}, validate=False)
        if isinstance(value, (_Undefined, _Function)) and _js_truthy(self.root):
            raise self._fail("Cannot move or copy a missing value", "OPERATION_FROM_MISSING")
        # On a falsy document (no validation) a missing value is moved or copied into a
        # primitive, which JavaScript ignores (and null raises TypeError, as it does there).
        self._walk({"op": "add", "path": op["path"], "_moved": value}, validate=False)


def apply_patch(
    document: Any, operations: Sequence[Any], *, max_depth: int = DOCUMENT_DEPTH
) -> Any:
    """Apply RFC 6902 ``operations`` to ``document`` all-or-nothing; return the new document.

    ``document`` is never modified: the result shares every container the patch did not touch.
    Values taken from the operations are copied, so the result does not alias the patch.

    :param max_depth: the most levels of containers the result may hold (the document's own
        container is level 1). The default, :data:`DOCUMENT_DEPTH`, is what a snapshot event
        can carry, so a patched state or activity content can always be sent, encoded, copied
        and printed again.
    :raises PatchError: an operation failed validation or a ``test`` failed (the reference
        client warns and keeps the old document), or it would nest the document more than
        ``max_depth`` levels deep (``TOO_DEEP``: an agui-meta limit; the reference goes on
        until it runs out of stack, much deeper).
    """
    patcher = _Patcher(document, max_depth)
    for index, op in enumerate(operations):
        try:
            patcher.apply(op, index)
        except TypeError as exc:
            raise PatchError(str(exc), "TYPE_ERROR", index) from None
        except RecursionError:
            # A document grown deep by earlier patches: copying or comparing it would need more
            # stack than Python has. The document is untouched (copy on write), as on any failure.
            raise PatchError(
                "the values involved are nested too deeply to copy or compare", "TOO_DEEP", index
            ) from None
    return patcher.root
