"""JSON Patch with the reference client's semantics (fast-json-patch 3.1.1, validating).

Expected values: RFC 6902 (its appendix A examples) where fast-json-patch follows it, and
fast-json-patch's source (``commonjs/core.js``) where it does not; the last test compares
random patches with the reference client itself.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_meta import _patch
from agui_meta._patch import PatchError, apply_patch, js_equal
from agui_meta._runners import run_case
from tests.oracle import OracleServer, assert_same_result

DOC: dict[str, Any] = {
    "a": 1,
    "obj": {"x": [1, 2, {"y": None}]},
    "arr": [0, 1, 2],
    "t": True,
    "s": "str",
}


def patched(doc: Any, *ops: Any) -> Any:
    before = copy.deepcopy(doc)
    result = apply_patch(doc, list(ops))
    assert doc == before, "the original document was modified"
    return result


def fails(doc: Any, *ops: Any) -> str:
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError) as info:
        apply_patch(doc, list(ops))
    assert doc == before
    return info.value.name


class TestRfc6902:
    """RFC 6902 appendix A, where the reference agrees with it."""

    def test_adding_an_object_member(self) -> None:
        assert patched({"foo": "bar"}, {"op": "add", "path": "/baz", "value": "qux"}) == {
            "foo": "bar",
            "baz": "qux",
        }

    def test_adding_an_array_element(self) -> None:
        doc = {"foo": ["bar", "baz"]}
        assert patched(doc, {"op": "add", "path": "/foo/1", "value": "qux"}) == {
            "foo": ["bar", "qux", "baz"]
        }

    def test_removing_an_object_member_and_an_array_element(self) -> None:
        assert patched({"baz": "qux", "foo": "bar"}, {"op": "remove", "path": "/baz"}) == {
            "foo": "bar"
        }
        assert patched({"foo": ["bar", "qux", "baz"]}, {"op": "remove", "path": "/foo/1"}) == {
            "foo": ["bar", "baz"]
        }

    def test_replacing_a_value(self) -> None:
        assert patched({"baz": "qux"}, {"op": "replace", "path": "/baz", "value": "boo"}) == {
            "baz": "boo"
        }

    def test_moving_a_value_and_an_array_element(self) -> None:
        doc = {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}
        assert patched(doc, {"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}) == {
            "foo": {"bar": "baz"},
            "qux": {"corge": "grault", "thud": "fred"},
        }
        doc2 = {"foo": ["all", "grass", "cows", "eat"]}
        assert patched(doc2, {"op": "move", "from": "/foo/1", "path": "/foo/3"}) == {
            "foo": ["all", "cows", "eat", "grass"]
        }

    def test_testing_a_value_success_and_error(self) -> None:
        doc = {"baz": "qux", "foo": ["a", 2, "c"]}
        ops = [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ]
        assert patched(doc, *ops) == doc
        assert fails({"baz": "qux"}, {"op": "test", "path": "/baz", "value": "bar"}) == (
            "TEST_OPERATION_FAILED"
        )

    def test_adding_a_nested_member_object(self) -> None:
        assert patched({"foo": "bar"}, {"op": "add", "path": "/child", "value": {"g": "h"}}) == {
            "foo": "bar",
            "child": {"g": "h"},
        }

    def test_adding_to_a_nonexistent_target(self) -> None:
        assert fails({"foo": "bar"}, {"op": "add", "path": "/baz/bat", "value": "qux"}) == (
            "OPERATION_PATH_CANNOT_ADD"
        )

    def test_tilde_escape_ordering_and_comparing_strings_and_numbers(self) -> None:
        doc = {"/": 9, "~1": 10}
        assert patched(doc, {"op": "test", "path": "/~01", "value": 10}) == doc
        assert fails(doc, {"op": "test", "path": "/~01", "value": "10"}) == (
            "TEST_OPERATION_FAILED"
        )
        assert patched(doc, {"op": "remove", "path": "/~1"}) == {"~1": 10}

    def test_adding_an_array_value(self) -> None:
        assert patched({"foo": ["bar"]}, {"op": "add", "path": "/foo/-", "value": ["abc"]}) == {
            "foo": ["bar", ["abc"]]
        }


class TestReferenceSemantics:
    """Where fast-json-patch (validating) decides, and sometimes departs from the RFC."""

    def test_replace_and_remove_need_an_existing_target(self) -> None:
        assert fails(DOC, {"op": "replace", "path": "/nope", "value": 1}) == (
            "OPERATION_PATH_UNRESOLVABLE"
        )
        assert fails(DOC, {"op": "remove", "path": "/arr/3"}) == "OPERATION_PATH_UNRESOLVABLE"

    def test_add_checks_the_array_bound_but_copy_and_move_append(self) -> None:
        assert fails(DOC, {"op": "add", "path": "/arr/4", "value": 9}) == (
            "OPERATION_VALUE_OUT_OF_BOUNDS"
        )
        assert patched(DOC, {"op": "copy", "from": "/a", "path": "/arr/9"})["arr"] == [0, 1, 2, 1]
        assert patched(DOC, {"op": "move", "from": "/arr/0", "path": "/arr/9"})["arr"] == [1, 2, 0]

    def test_array_indices_leading_zeros_empty_and_32_bit_truncation(self) -> None:
        assert patched(DOC, {"op": "add", "path": "/arr/01", "value": 9})["arr"] == [0, 9, 1, 2]
        assert patched(DOC, {"op": "add", "path": "/arr/", "value": 9})["arr"] == [9, 0, 1, 2]
        assert patched(DOC, {"op": "add", "path": "/arr/4294967296", "value": 9})["arr"] == [
            9,
            0,
            1,
            2,
        ]
        assert fails(DOC, {"op": "replace", "path": "/arr/01", "value": 9}) == (
            "OPERATION_PATH_UNRESOLVABLE"
        )
        assert fails(DOC, {"op": "add", "path": "/arr/x", "value": 9}) == (
            "OPERATION_PATH_ILLEGAL_ARRAY_INDEX"
        )

    def test_numeric_keys_on_objects_are_plain_keys(self) -> None:
        assert patched({"0": "z"}, {"op": "replace", "path": "/0", "value": 1}) == {"0": 1}

    def test_booleans_are_not_numbers_but_integers_equal_floats(self) -> None:
        assert fails(DOC, {"op": "test", "path": "/t", "value": 1}) == "TEST_OPERATION_FAILED"
        assert fails(DOC, {"op": "test", "path": "/a", "value": True}) == "TEST_OPERATION_FAILED"
        assert patched(DOC, {"op": "test", "path": "/a", "value": 1.0}) == DOC
        assert js_equal({"k": [1, {"x": None}]}, {"k": [1.0, {"x": None}]})
        assert not js_equal({"k": None}, {})

    def test_inherited_names_exist_for_validation(self) -> None:
        assert patched({}, {"op": "replace", "path": "/toString", "value": 1}) == {"toString": 1}
        assert patched({}, {"op": "remove", "path": "/constructor"}) == {}
        assert fails({}, {"op": "test", "path": "/valueOf", "value": 1}) == (
            "TEST_OPERATION_FAILED"
        )

    def test_prototype_paths_are_refused(self) -> None:
        assert fails({}, {"op": "add", "path": "/__proto__", "value": 1}) == "TYPE_ERROR"
        own: dict[str, Any] = {"constructor": {}}
        assert fails(own, {"op": "add", "path": "/constructor/prototype", "value": 1}) == (
            "TYPE_ERROR"
        )

    def test_root_operations(self) -> None:
        assert patched(DOC, {"op": "replace", "path": "", "value": [1]}) == [1]
        assert patched(DOC, {"op": "remove", "path": ""}) is None
        assert patched(DOC, {"op": "move", "from": "/obj", "path": ""}) == DOC["obj"]
        assert fails(DOC, {"op": "test", "path": "", "value": {}}) == "TEST_OPERATION_FAILED"

    def test_a_failure_abandons_the_whole_patch(self) -> None:
        ops = [
            {"op": "add", "path": "/b", "value": 2},
            {"op": "remove", "path": "/missing"},
        ]
        assert fails(DOC, *ops) == "OPERATION_PATH_UNRESOLVABLE"

    def test_a_primitive_document(self) -> None:
        assert patched(5, {"op": "add", "path": "/x", "value": 1}) == 5
        assert fails(None, {"op": "add", "path": "/x", "value": 1}) == "TYPE_ERROR"


class TestCopyOnWrite:
    def test_untouched_containers_are_shared_and_touched_ones_copied(self) -> None:
        doc: dict[str, Any] = {"big": list(range(1000)), "obj": {"x": [1], "y": {"z": 1}}}
        new = patched(doc, {"op": "add", "path": "/obj/x/-", "value": 2})
        assert new["big"] is doc["big"]
        assert new["obj"]["y"] is doc["obj"]["y"]
        assert new["obj"]["x"] == [1, 2] and doc["obj"]["x"] == [1]

    def test_values_from_the_patch_are_copied(self) -> None:
        value = {"k": [1]}
        new = apply_patch({}, [{"op": "add", "path": "/v", "value": value}])
        value["k"].append(2)
        assert new == {"v": {"k": [1]}}

    def test_copy_does_not_alias_its_source(self) -> None:
        new = patched(
            {"a": {"k": 1}},
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "replace", "path": "/b/k", "value": 2},
        )
        assert new == {"a": {"k": 1}, "b": {"k": 2}}

    def test_a_container_added_earlier_in_the_patch_is_modified_in_place(self) -> None:
        new = patched(
            {}, {"op": "add", "path": "/a", "value": {}}, {"op": "add", "path": "/a/b", "value": 1}
        )
        assert new == {"a": {"b": 1}}


def _random_path(rnd: random.Random, doc: Any) -> str:
    parts: list[str] = []
    node = doc
    while True:
        if isinstance(node, dict) and node and rnd.random() < 0.7:
            key = rnd.choice([*node, "zz", "0"])
        elif isinstance(node, list) and rnd.random() < 0.7:
            key = rnd.choice([*(str(i) for i in range(len(node) + 2)), "-", "01"])
        else:
            key = rnd.choice(["a", "b", "0", "-", "1", "~"])
        parts.append(key.replace("~", "~0").replace("/", "~1"))
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            node = None
        if node is None or rnd.random() < 0.4:
            return "/" + "/".join(parts)


def _random_cases(seed: int, count: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    values: list[Any] = [1, 1.0, True, None, "s", [1, 2], {"k": [1]}, {}, []]
    cases = []
    for n in range(count):
        doc = {"a": [1, {"b": 2}, [3]], "c": {"d": {"e": None}, "f": [True]}, "g": 0}
        ops = []
        for _ in range(rnd.randint(1, 4)):
            kind = rnd.choice(["add", "remove", "replace", "move", "copy", "test"])
            op: dict[str, Any] = {"op": kind, "path": _random_path(rnd, doc)}
            if kind in ("add", "replace", "test"):
                op["value"] = copy.deepcopy(rnd.choice(values))
            if kind in ("move", "copy"):
                op["from"] = _random_path(rnd, doc)
            ops.append(op)
        events = [{"type": "STATE_DELTA", "delta": ops}]
        cases.append({"name": f"patch-{seed}-{n}", "events": events, "state": doc})
    return cases


@pytest.mark.parametrize("seed", range(4))
def test_random_patches_agree_with_the_reference(oracle: OracleServer, seed: int) -> None:
    for case in _random_cases(seed, 100):
        expected = oracle.run_one(case, verify=False)
        assert_same_result(run_case(case, verify=False), expected, case)
        json.dumps(case)  # the case is plain JSON (so a failure can be replayed)


def _falsy_root_cases() -> list[dict[str, Any]]:
    """Patches that turn the document into a value JavaScript finds falsy, then go on: the
    reference checks operations against the document only while it is truthy."""
    roots: list[Any] = [False, 0, 0.0, "", None, True, 1, "s"]
    follow: list[list[dict[str, Any]]] = [
        [{"op": "add", "path": "/a", "value": None}],
        [{"op": "remove", "path": "/a"}],
        [{"op": "replace", "path": "/a", "value": 1}],
        [{"op": "test", "path": "/a", "value": 1}],
        [{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/a"}],
        [{"op": "add", "path": "/a/b", "value": 1}],
        [{"op": "remove", "path": "/a/b"}],
        [{"op": "copy", "from": "/a", "path": "/b"}],
        [{"op": "move", "from": "/a", "path": "/b"}],
        [{"op": "add", "path": "/0", "value": 2}],
        [{"op": "add", "path": "/-", "value": 2}],
    ]
    cases = []
    for i, root in enumerate(roots):
        for j, ops in enumerate(follow):
            delta = [{"op": "add", "path": "", "value": root}, *ops]
            for kind, event in (
                ("state", {"type": "STATE_DELTA", "delta": delta}),
                (
                    "activity",
                    {
                        "type": "ACTIVITY_DELTA",
                        "messageId": "a1",
                        "activityType": "p",
                        "patch": delta,
                    },
                ),
            ):
                events: list[dict[str, Any]] = [event]
                if kind == "activity":
                    events.insert(
                        0,
                        {
                            "type": "ACTIVITY_SNAPSHOT",
                            "messageId": "a1",
                            "activityType": "p",
                            "content": {"k": [1]},
                        },
                    )
                cases.append({"name": f"falsy-{kind}-{i}-{j}", "events": events, "state": {"k": 1}})
    return cases


def test_patches_on_a_falsy_document_agree_with_the_reference(oracle: OracleServer) -> None:
    cases = _falsy_root_cases()
    for case, expected in zip(cases, oracle.run(cases, verify=False), strict=True):
        assert_same_result(run_case(case, verify=False), expected, case)


# -- the one-walk path of replace and add (_Patcher._simple) against the general walk


class _GeneralOnly(_patch._Patcher):
    """The patcher without its one-walk path: every operation through the general walk."""

    __slots__ = ()

    def _simple(self, op: Any) -> bool:
        return False


def _general(document: Any, operations: list[Any]) -> Any:
    patcher = _GeneralOnly(document, _patch.DOCUMENT_DEPTH)
    for index, op in enumerate(operations):
        try:
            patcher.apply(op, index)
        except TypeError as exc:
            raise PatchError(str(exc), "TYPE_ERROR", index) from None
    return patcher.root


_ODD_KEYS = st.sampled_from(
    ["01", "-", "", "~0", "a~1b", "__proto__", "constructor", "prototype", "toString"]
)
_KEYS = st.one_of(st.sampled_from(["a", "b", "c", "0", "1", "2"]), _ODD_KEYS)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["", "s"]))


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(_KEYS, inner, min_size=1, max_size=3),
    )


_VALUES = st.recursive(_SCALARS, _containers, max_leaves=10)
#: Documents: a container at the root, as a state or an activity's content is.
_DOCS = _containers(st.recursive(_SCALARS, _containers, max_leaves=8))


def _paths_into(doc: Any) -> list[str]:
    """Every location of ``doc`` as a pointer (so that generated operations mostly hit)."""
    found = [""]
    if isinstance(doc, dict):
        items: list[tuple[str, Any]] = list(doc.items())
    elif isinstance(doc, list):
        items = [(str(i), v) for i, v in enumerate(doc)]
    else:
        return found
    for key, value in items:
        escaped = key.replace("~", "~0").replace("/", "~1")
        found += ["/" + escaped + rest for rest in _paths_into(value)]
    return found


@st.composite
def _replaces_and_adds(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    doc = draw(_DOCS)
    paths = _paths_into(doc)
    ops: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        if not draw(st.integers(0, 3)):
            path += "/" + draw(_KEYS)  # one level below a location: new, or not there
        op: dict[str, Any] = {
            "op": draw(st.sampled_from(["replace", "replace", "add", "add", "test", "remove"]))
        }
        if draw(st.integers(0, 9)):
            op["path"] = path
        if draw(st.integers(0, 9)):
            op["value"] = draw(_VALUES)
        ops.append(op)
    return doc, ops


def _outcome(document: Any, operations: list[Any], native: bool) -> Any:
    """apply_patch's result or failure, with the C core's one-walk path or without it."""
    hook = _patch._NATIVE_SIMPLE if native else None
    with mock.patch.object(_patch, "_NATIVE_SIMPLE", hook):
        try:
            return ("ok", apply_patch(document, copy.deepcopy(operations)))
        except PatchError as exc:
            return ("failed", exc.name, exc.index, str(exc))


def _shared(result: Any, document: Any) -> list[tuple[str, bool]]:
    """Each container of result by its place, and whether it is the document's own there."""
    out: list[tuple[str, bool]] = []

    def walk(value: Any, original: Any, place: str) -> None:
        if not isinstance(value, (dict, list)):
            return
        out.append((place, value is original))
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            try:
                inner = original[key]
            except (KeyError, IndexError, TypeError):
                inner = None
            walk(item, inner, f"{place}/{key}")

    walk(result, document, "")
    return out


@settings(max_examples=400, deadline=None)
@given(_replaces_and_adds())
def test_the_one_walk_path_is_the_general_walk(case: tuple[Any, list[Any]]) -> None:
    doc, ops = case
    before = copy.deepcopy(doc)
    try:
        expected: Any = ("ok", _general(doc, copy.deepcopy(ops)))
    except PatchError as exc:
        expected = ("failed", exc.name, exc.index, str(exc))
    python = _outcome(doc, ops, native=False)
    assert python == expected
    if _patch._NATIVE_SIMPLE is not None:  # the C core's too, sharing what Python shares
        native = _outcome(doc, ops, native=True)
        assert native == expected
        if native[0] == "ok":
            assert _shared(native[1], doc) == _shared(python[1], doc)
    assert doc == before, "the original document was modified"


@pytest.mark.skipif(_patch._NATIVE_SIMPLE is None, reason="the C core is not in use")
def test_the_c_one_walk_path_takes_the_common_operations() -> None:
    native = _patch._NATIVE_SIMPLE
    assert native is not None
    doc: dict[str, Any] = {"steps": [{"status": "pending"}], "n": {"a": 1}}
    fresh: dict[int, Any] = {}
    root = native(doc, fresh, {"op": "replace", "path": "/steps/0/status", "value": "done"})
    assert root == {"steps": [{"status": "done"}], "n": {"a": 1}} and root["n"] is doc["n"]
    assert sorted(fresh) == sorted(map(id, (root, root["steps"], root["steps"][0])))
    again = native(root, fresh, {"op": "add", "path": "/steps/0/at", "value": 2})
    assert again is root and root["steps"][0] == {"status": "done", "at": 2}
    assert doc == {"steps": [{"status": "pending"}], "n": {"a": 1}}
    # Anything else is the Python path's: nothing done, nothing recorded.
    for op in (
        {"op": "add", "path": "/steps/1", "value": 1},  # an array's add inserts
        {"op": "replace", "path": "/steps/01/status", "value": 1},
        {"op": "replace", "path": "/n/b", "value": 1},  # not there
        {"op": "replace", "path": "/n/a", "value": {"x": 1}},  # a container: copied in Python
        {"op": "replace", "path": "/n/a~1b", "value": 1},
        {"op": "replace", "path": "/n/__proto__", "value": 1},
        {"op": "replace", "path": "/n/a"},
        {"op": "remove", "path": "/n/a"},
        {"op": "replace", "path": "/n/é", "value": 1},
    ):
        fresh = {}
        assert native(doc, fresh, op) is None and not fresh, op
    with pytest.raises(TypeError):
        native(doc, [], {"op": "add", "path": "/x", "value": 1})  # type: ignore[arg-type]


def test_the_one_walk_path_copies_only_the_containers_on_its_path() -> None:
    doc: dict[str, Any] = {"steps": [{"status": "pending"}, {"status": "pending"}], "t": {"x": 1}}
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/steps/0/status", "value": "done"},
        {"op": "add", "path": "/steps/0/at", "value": [1]},
    ]
    out: Any = apply_patch(doc, ops)
    assert out == {
        "steps": [{"status": "done", "at": [1]}, {"status": "pending"}],
        "t": {"x": 1},
    }
    assert doc["steps"][0] == {"status": "pending"}
    assert out["t"] is doc["t"] and out["steps"][1] is doc["steps"][1]
    assert out["steps"][0]["at"] is not ops[1]["value"]  # values are copied, never aliased
