"""Conformance with the reference client (the official TypeScript client @ag-ui/client 1.0.0).

- The golden corpus (``tests/golden``): every case runs through our command
  ``python -m agui_meta apply CASES.jsonl [--no-verify]`` and must give the result the reference
  gave (``expected*.jsonl``, produced by ``tests/golden/generate.py`` with the official
  ``apply.cjs``). One test per case, named after the case.
- The spec overrides (``tests/golden/spec_overrides.jsonl``): the two places where the
  specification overrides the reference, against hand-written expectations.
- Housekeeping: the committed files match ``generate.py`` and the official oracle.

How results are compared (see ``tests/oracle.py``): as JSON values, with ``true``/``1`` kept
apart and ``1``/``1.0`` equal; errors only as "both errored" (the messages are worded
differently, ours is shown on failure); ids the reference mints at random (``THINKING_*``
translation) as ``<minted-N>`` placeholders; and, for the corpus only, integers beyond 2**53
compared as doubles and ``__proto__`` metadata keys ignored -- the two specification overrides,
which ``spec_overrides.jsonl`` tests exactly instead.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.oracle import (
    REPO_ROOT,
    OracleServer,
    assert_same_result,
    comparable,
    describe_mismatch,
    normalise_minted_ids,
    oracle_required,
    run_official,
)
from tests.oracle import OracleUnavailable as _OracleUnavailable

GOLDEN = Path(__file__).resolve().parent / "golden"
CORPORA = {
    True: ("cases.jsonl", "expected.jsonl"),
    False: ("cases_noverify.jsonl", "expected_noverify.jsonl"),
}
CASE_KEYS = ("name", "events", "messages", "state")


def _load(name: str) -> list[dict[str, Any]]:
    text = (GOLDEN / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _run_cli(path: Path, verify: bool) -> dict[str, dict[str, Any]]:
    """Run our ``apply`` command on a cases file; its result lines by case name."""
    argv = [sys.executable, "-m", "agui_meta", "apply", str(path)]
    if not verify:
        argv.append("--no-verify")
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", check=False
    )
    results: dict[str, dict[str, Any]] = {}
    try:
        for line in done.stdout.splitlines():
            if line.strip():
                result = json.loads(line)
                results[result["name"]] = result
    except (ValueError, KeyError, TypeError) as exc:
        pytest.fail(f"`{' '.join(argv[1:])}` printed something that is not a result line: {exc}")
    if not results:
        pytest.fail(
            f"`{' '.join(argv[1:])}` exited with {done.returncode} and printed no results;"
            f" stderr:\n{done.stderr[-3000:]}"
        )
    return results


@functools.cache
def _corpus_results(verify: bool) -> dict[str, dict[str, Any]]:
    return _run_cli(GOLDEN / CORPORA[verify][0], verify)


def _golden_params() -> list[Any]:
    params = []
    for verify, (cases_file, expected_file) in CORPORA.items():
        expected = {result["name"]: result for result in _load(expected_file)}
        for case in _load(cases_file):
            params.append(pytest.param(verify, case, expected.get(case["name"]), id=case["name"]))
    return params


@pytest.mark.parametrize(("verify", "case", "expected"), _golden_params())
def test_golden_case(verify: bool, case: dict[str, Any], expected: dict[str, Any] | None) -> None:
    if expected is None:
        pytest.fail(f"no expected result for {case['name']}: run tests/golden/generate.py")
    ours = _corpus_results(verify).get(case["name"])
    if ours is None:
        pytest.fail(f"`python -m agui_meta apply` printed no result for {case['name']}")
    assert_same_result(ours, expected, case)


def test_golden_files_are_in_sync_with_generate_py() -> None:
    """The committed cases are exactly what generate.py builds, and every case has a result."""
    from tests.golden import generate

    corpus = generate.build()
    for verify, cases in ((True, corpus.verified), (False, corpus.unverified)):
        cases_file, expected_file = CORPORA[verify]
        built = generate.dumps(cases).splitlines()
        committed = (GOLDEN / cases_file).read_text(encoding="utf-8").splitlines()
        stale = [json.loads(line)["name"] for line in set(built) ^ set(committed)]
        assert built == committed, (
            f"{cases_file} is out of date ({len(committed)} lines committed, {len(built)} built;"
            f" cases that differ: {sorted(set(stale))[:10]}): run `python tests/golden/generate.py`"
        )
        names = [result["name"] for result in _load(expected_file)]
        assert names == [case["name"] for case in cases], (
            f"{expected_file} does not match {cases_file}: run `python tests/golden/generate.py`"
        )


def test_golden_corpus_size() -> None:
    verified, unverified = _load("cases.jsonl"), _load("cases_noverify.jsonl")
    names = [case["name"] for case in verified + unverified]
    assert len(names) >= 300
    assert len(set(names)) == len(names)


def _official(cases: list[dict[str, Any]], verify: bool) -> list[dict[str, Any]]:
    try:
        return run_official(cases, verify)
    except _OracleUnavailable as exc:
        if oracle_required():
            raise
        pytest.skip(f"the reference oracle is unavailable: {exc}")


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_expected_files_match_the_official_oracle(verify: bool) -> None:
    """The committed expectations are what the official apply.cjs gives today."""
    cases_file, expected_file = CORPORA[verify]
    cases = _load(cases_file)
    stored = _load(expected_file)
    fresh = _official(cases, verify)
    differing = [
        case["name"]
        for case, old, new in zip(cases, stored, fresh, strict=True)
        if comparable(old, spec_overrides=False)
        != comparable(normalise_minted_ids(new, case), spec_overrides=False)
    ]
    assert not differing, f"stale expectations, run tests/golden/generate.py: {differing[:10]}"


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_oracle_server_matches_apply_cjs(oracle: OracleServer, verify: bool) -> None:
    """Our persistent driver gives what the official script gives, on every corpus case."""
    cases_file, expected_file = CORPORA[verify]
    for case, expected in zip(_load(cases_file), _load(expected_file), strict=True):
        if case["name"].startswith("gen/large-"):
            continue  # seconds each in the reference; the apply.cjs check above covers them
        served = normalise_minted_ids(oracle.run_one(case, verify), case)
        assert comparable(served, spec_overrides=False) == comparable(
            expected, spec_overrides=False
        ), f"{case['name']}{describe_mismatch(served, expected)}"


# ---------------------------------------------------------------------------------------------
# The specification overrides


def _override_cases() -> list[dict[str, Any]]:
    return _load("spec_overrides.jsonl")


def _case_part(override: dict[str, Any]) -> dict[str, Any]:
    return {key: override[key] for key in CASE_KEYS if key in override}


@functools.cache
def _override_cli_results(verify: bool) -> dict[str, dict[str, Any]]:
    cases = [_case_part(o) for o in _override_cases() if o.get("verify", True) is verify]
    with tempfile.TemporaryDirectory(prefix="agui-overrides-") as tmp:
        path = Path(tmp) / "overrides.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        return _run_cli(path, verify)


@pytest.mark.parametrize("override", _override_cases(), ids=lambda o: o["name"])
def test_spec_override_cli(override: dict[str, Any]) -> None:
    """``__proto__`` metadata keys are kept and big integers stay exact, through the command."""
    verify = override.get("verify", True)
    ours = _override_cli_results(verify).get(override["name"])
    if ours is None:
        pytest.fail(f"`python -m agui_meta apply` printed no result for {override['name']}")
    expected = {"name": override["name"], **override["expected"]}
    assert_same_result(ours, expected, _case_part(override), spec_overrides=False)


@pytest.mark.parametrize("override", _override_cases(), ids=lambda o: o["name"])
def test_spec_override_in_process(override: dict[str, Any]) -> None:
    """The same through ``agui_meta._conformance.run_case``."""
    from agui_meta._conformance import run_case

    case = _case_part(override)
    ours = run_case(case, verify=override.get("verify", True))
    expected = {"name": override["name"], **override["expected"]}
    assert_same_result(ours, expected, case, spec_overrides=False)


@pytest.mark.parametrize("override", _override_cases(), ids=lambda o: o["name"])
def test_spec_override_expectations_agree_with_the_reference_elsewhere(
    oracle: OracleServer, override: dict[str, Any]
) -> None:
    """The hand-written expectations differ from the reference only by the two overrides.

    That is, they equal the reference's result once both are normalised; a case marked
    ``referenceDiffers`` shows a consequence the normalisation cannot express (its note says
    which) and must, on the contrary, differ.
    """
    case = _case_part(override)
    reference = oracle.run_one(case, override.get("verify", True))
    expected = {"name": override["name"], **override["expected"]}
    same = comparable(reference) == comparable(expected)
    assert same is not override.get("referenceDiffers", False), (
        f"{override['name']}: {override.get('note', '')}"
        f"{describe_mismatch(expected, reference, 'hand-written')}"
    )
