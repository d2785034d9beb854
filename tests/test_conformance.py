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
    OracleUnavailable,
    assert_same_result,
    comparable,
    describe_mismatch,
    normalise_minted_ids,
    oracle_missing,
    run_official,
)

GOLDEN = Path(__file__).resolve().parent / "golden"
CORPORA = {
    True: ("cases.jsonl", "expected.jsonl"),
    False: ("cases_noverify.jsonl", "expected_noverify.jsonl"),
}
CASE_KEYS = ("name", "events", "messages", "state")


def _load(name: str) -> list[dict[str, Any]]:
    text = (GOLDEN / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class _CliRun:
    """One run of our ``apply`` command on a cases file (run once, shared by many tests)."""

    def __init__(self, path: Path, verify: bool) -> None:
        argv = [sys.executable, "-m", "agui_meta", "apply", str(path)]
        if not verify:
            argv.append("--no-verify")
        self.command = " ".join(["python", *argv[1:]])
        done = subprocess.run(
            argv, cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", check=False
        )
        self.returncode, self.stderr = done.returncode, done.stderr[-3000:]
        self.results: dict[str, dict[str, Any]] = {}
        self.garbage: str | None = None
        for line in done.stdout.splitlines():
            try:
                result = json.loads(line)
                self.results[result["name"]] = result
            except (ValueError, KeyError, TypeError):
                self.garbage = self.garbage or line[:300]

    def result(self, name: str) -> dict[str, Any]:
        """The result line for case *name*, or a test failure saying what went wrong."""
        if name not in self.results:
            pytest.fail(
                f"`{self.command}` printed no result for {name} (exit status {self.returncode},"
                f" first unreadable line: {self.garbage!r}); stderr:\n{self.stderr}"
            )
        return self.results[name]


@functools.cache
def _corpus_run(verify: bool) -> _CliRun:
    return _CliRun(GOLDEN / CORPORA[verify][0], verify)


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
    assert_same_result(_corpus_run(verify).result(case["name"]), expected, case)


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
    except OracleUnavailable as exc:
        oracle_missing(exc)


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
def _override_run(verify: bool) -> _CliRun:
    cases = [_case_part(o) for o in _override_cases() if o.get("verify", True) is verify]
    with tempfile.TemporaryDirectory(prefix="agui-overrides-") as tmp:
        path = Path(tmp) / "overrides.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        return _CliRun(path, verify)


@pytest.mark.parametrize("override", _override_cases(), ids=lambda o: o["name"])
def test_spec_override_cli(override: dict[str, Any]) -> None:
    """``__proto__`` metadata keys are kept and big integers stay exact, through the command."""
    ours = _override_run(override.get("verify", True)).result(override["name"])
    expected = {"name": override["name"], **override["expected"]}
    assert_same_result(ours, expected, _case_part(override), spec_overrides=False)


@pytest.mark.parametrize("override", _override_cases(), ids=lambda o: o["name"])
def test_spec_override_in_process(override: dict[str, Any]) -> None:
    """The same through ``agui_meta._runners.run_case``."""
    from agui_meta._runners import run_case

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
