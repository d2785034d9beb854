"""Harness for the reference oracle (the official TypeScript client) and result comparison.

The oracle lives read-only at ``<repo>/../shared/oracle``. :func:`prepare_oracle` copies it into
``<repo>/.cache/oracle`` and installs its npm dependencies there once (guarded by a file lock and
a stamp of the lock file, so parallel runs and repeated runs do nothing twice). Two ways to run it:

- :func:`run_official` runs the official ``apply.cjs`` script, one Node process per call; the
  golden files are produced with it.
- :class:`OracleServer` keeps one Node process (``tests/oracle_server.cjs``) alive and feeds it
  one case per line; :func:`run_oracle` uses a shared instance. Tests use it for speed.

Both raise :class:`OracleUnavailable` when Node.js or npm is missing or the install fails, so that
tests can skip with the reason.

The module also holds the comparison rules shared by every conformance test (see
:func:`comparable` and :func:`normalise_minted_ids`). Only the standard library is used, so
``tests/golden/generate.py`` can import it from a plain interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from tests.needs import flag, in_ci, missing

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where the oracle is read from: ``$AGUI_META_ORACLE_SOURCE`` when set (a git worktree kept
#: elsewhere than beside ``shared/``), else ``<repo>/../shared/oracle``.
ORACLE_SOURCE = Path(
    os.environ.get("AGUI_META_ORACLE_SOURCE") or REPO_ROOT.parent / "shared" / "oracle"
)
ORACLE_DIR = REPO_ROOT / ".cache" / "oracle"
SERVER_SCRIPT = Path(__file__).resolve().parent / "oracle_server.cjs"
_STAMP = ".agui-meta-stamp"
_NPM_TIMEOUT = 900

#: When this variable (or ``CI``, which CI runners set) is set (non-empty, not "0"), tests that
#: need the oracle fail instead of skipping when it is unavailable (see :func:`oracle_required`),
#: so a CI machine whose Node.js set-up broke cannot pass by skipping the conformance tests.
REQUIRE_ENV = "AGUI_META_REQUIRE_ORACLE"


class OracleUnavailable(RuntimeError):
    """Node.js / npm is missing, or the oracle could not be installed."""


class OracleError(RuntimeError):
    """The oracle process itself failed (crashed, printed garbage, lost a case)."""


# ---------------------------------------------------------------------------------------------
# Set-up


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _stamp_of(directory: Path) -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update(name.encode())
        digest.update((directory / name).read_bytes())
    return digest.hexdigest()


_prepared: Path | None = None


def prepare_oracle() -> Path:
    """Copy the oracle into ``.cache/oracle`` and ``npm ci`` it once; return that directory.

    :raises OracleUnavailable: Node.js or npm is missing, the oracle folder is not there, or the
        install failed.
    """
    global _prepared
    if _prepared is not None:
        return _prepared
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise OracleUnavailable(f"{tool!r} is not on PATH (Node.js 20 and npm are needed)")
    if not (ORACLE_SOURCE / "apply.cjs").is_file():
        raise OracleUnavailable(f"the reference oracle is missing: no {ORACLE_SOURCE}/apply.cjs")
    with _locked(ORACLE_DIR.parent / "oracle.lock"):
        ORACLE_DIR.mkdir(parents=True, exist_ok=True)
        for source in sorted(ORACLE_SOURCE.iterdir()):
            if not source.is_file():
                continue
            target = ORACLE_DIR / source.name
            data = source.read_bytes()
            if not target.is_file() or target.read_bytes() != data:
                target.write_bytes(data)
        stamp_file = ORACLE_DIR / "node_modules" / _STAMP
        stamp = _stamp_of(ORACLE_DIR)
        if not stamp_file.is_file() or stamp_file.read_text() != stamp:
            try:
                done = subprocess.run(
                    ["npm", "ci", "--silent", "--no-audit", "--no-fund"],
                    cwd=ORACLE_DIR,
                    capture_output=True,
                    text=True,
                    timeout=_NPM_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise OracleUnavailable(f"npm ci failed in {ORACLE_DIR}: {exc}") from exc
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip()[-2000:]
                raise OracleUnavailable(
                    f"npm ci failed in {ORACLE_DIR} (exit {done.returncode}): {tail}"
                )
            stamp_file.write_text(stamp)
    _prepared = ORACLE_DIR
    return ORACLE_DIR


# ---------------------------------------------------------------------------------------------
# Running


def _parse_lines(text: str, cases: list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
    results = [json.loads(line) for line in text.splitlines() if line.strip()]
    if len(results) != len(cases) or any(
        r.get("name") != c.get("name") for r, c in zip(results, cases, strict=True)
    ):
        raise OracleError(f"{what} returned {len(results)} results for {len(cases)} cases")
    return results


def run_official(cases: list[dict[str, Any]], verify: bool = True) -> list[dict[str, Any]]:
    """Run *cases* through the official ``apply.cjs`` (one Node process for the whole list)."""
    directory = prepare_oracle()
    with tempfile.TemporaryDirectory(prefix="agui-oracle-") as tmp:
        path = Path(tmp) / "cases.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        argv = ["node", str(directory / "apply.cjs"), str(path)]
        if not verify:
            argv.append("--no-verify")
        done = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", check=False)
    if done.returncode != 0:
        raise OracleError(f"apply.cjs exited with {done.returncode}: {done.stderr[-2000:]}")
    return _parse_lines(done.stdout, cases, "apply.cjs")


class OracleServer:
    """One persistent ``node tests/oracle_server.cjs`` process that serves cases line by line."""

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory if directory is not None else prepare_oracle()
        # Lives as long as the process (read when it fails), so no context manager.
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(
            ["node", str(SERVER_SCRIPT), str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )

    def _failure(self, what: str) -> OracleError:
        self._stderr.seek(0)
        log = self._stderr.read().decode("utf-8", "replace")[-2000:]
        return OracleError(f"oracle server {what}; its stderr: {log}")

    def run_one(self, case: dict[str, Any], verify: bool = True) -> dict[str, Any]:
        """Run one case and return its result line as a dict."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        request = json.dumps({"verify": verify, "case": case}, ensure_ascii=False)
        try:
            stdin.write(request.encode("utf-8") + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._failure("is gone") from exc
        line = stdout.readline()
        if not line:
            raise self._failure("exited")
        result: dict[str, Any] = json.loads(line)
        if result.get("name") != case.get("name"):
            raise self._failure(f"answered {result.get('name')!r} for {case.get('name')!r}")
        return result

    def run(self, cases: list[dict[str, Any]], verify: bool = True) -> list[dict[str, Any]]:
        """Run *cases* one after the other; one result per case, in order."""
        return [self.run_one(case, verify) for case in cases]

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            with contextlib.suppress(OSError):
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


_server: OracleServer | None = None


def oracle_server() -> OracleServer:
    """The shared persistent server, started on first use and closed at interpreter exit."""
    global _server
    if _server is None:
        _server = OracleServer()
        atexit.register(close_oracle_server)
    return _server


def close_oracle_server() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


def run_oracle(cases: list[dict[str, Any]], verify: bool = True) -> list[dict[str, Any]]:
    """Run *cases* through the reference client (persistent server); one result per case."""
    return oracle_server().run(cases, verify)


def oracle_required() -> bool:
    """Whether a missing oracle fails the tests: in CI (see tests/needs.py) or on demand."""
    return in_ci() or flag(REQUIRE_ENV)


def oracle_missing(exc: Exception) -> NoReturn:
    """The reference oracle cannot run: fail when it is required, else skip."""
    missing(f"the reference oracle is unavailable: {exc}", required=oracle_required())


# ---------------------------------------------------------------------------------------------
# Comparison
#
# Results are compared as JSON values, never as text: key order, ``1`` vs ``1.0`` and ``-0`` vs
# ``0`` do not matter (``JSON.stringify(1.0)`` is ``"1"``), but ``true`` vs ``1`` does (Python's
# ``True == 1`` is not allowed to hide that), so values are first mapped to a tagged form.
#
# Two documented places where the specification overrides the reference are normalised away
# when comparing with the reference (``spec_overrides=True``), and tested on their own against
# hand-written expectations (``tests/golden/spec_overrides.jsonl``):
#
# - integers beyond 2**53: JavaScript rounds them to the nearest double, we keep them exact;
#   every integer whose magnitude exceeds 2**53 is compared as ``float(value)`` on both sides;
# - a metadata key ``__proto__``: the reference is documented to drop it, the specification
#   keeps it; ``__proto__`` keys are removed from message and tool-call metadata (at any depth
#   inside it) on both sides. (The installed 1.0.0 client in fact keeps the key in every position
#   we tried, so this normalisation is a guard, not a necessity.)
#
# Message ids the reference *mints* (``THINKING_*`` translation uses random UUIDs) are replaced
# by ``<minted-N>`` placeholders, numbered in order of first appearance; see
# :func:`normalise_minted_ids`. The golden files store the placeholders, so regenerating them is
# deterministic.

_SAFE = 2**53
_UUID_IN_TEXT = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_UUID = re.compile(rf"^{_UUID_IN_TEXT.pattern}$")


def _tagged(value: Any, spec_overrides: bool) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        if spec_overrides and abs(value) > _SAFE:
            return ("num", float(value))
        return ("num", value)
    if isinstance(value, float):
        return ("num", value)
    if isinstance(value, list):
        return [_tagged(item, spec_overrides) for item in value]
    if isinstance(value, dict):
        return {key: _tagged(item, spec_overrides) for key, item in value.items()}
    raise TypeError(f"not a JSON value: {value!r}")


def _without_proto(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_proto(item) for item in value]
    if isinstance(value, dict):
        return {k: _without_proto(v) for k, v in value.items() if k != "__proto__"}
    return value


def _strip_metadata_proto(messages: Any) -> Any:
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        if isinstance(message, dict):
            message = dict(message)
            if "metadata" in message:
                message["metadata"] = _without_proto(message["metadata"])
            calls = message.get("toolCalls")
            if isinstance(calls, list):
                message["toolCalls"] = [
                    {**call, "metadata": _without_proto(call["metadata"])}
                    if isinstance(call, dict) and "metadata" in call
                    else call
                    for call in calls
                ]
        out.append(message)
    return out


def comparable(result: dict[str, Any], *, spec_overrides: bool = True) -> Any:
    """Map one result line to the form two results are compared in.

    Errors compare equal whatever their text (implementations word them differently).
    """
    if "error" in result:
        return "<error>"
    messages = result.get("messages")
    if spec_overrides:
        messages = _strip_metadata_proto(messages)
    return {
        "messages": _tagged(messages, spec_overrides),
        "state": _tagged(result.get("state"), spec_overrides),
    }


def _strings_in(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, list):
        for item in value:
            _strings_in(item, found)
    elif isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            _strings_in(item, found)


def normalise_minted_ids(result: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """Replace UUIDs that appear in *result* but nowhere in *case* by ``<minted-N>``.

    Whole string values are replaced in messages and state, and UUIDs inside an error's text.
    Numbering follows the first appearance in a walk of the messages (in order) and then the
    state, visiting object keys in sorted order so that key order does not matter. Idempotent.
    """
    known: set[str] = set()
    _strings_in(case, known)
    names: dict[str, str] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            if value not in known and _UUID.match(value):
                return names.setdefault(value, f"<minted-{len(names) + 1}>")
            return value
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            walked = {key: walk(value[key]) for key in sorted(value)}
            return {key: walked[key] for key in value}
        return value

    if "error" in result:
        error = _UUID_IN_TEXT.sub(
            lambda m: (
                m[0] if m[0] in known else names.setdefault(m[0], f"<minted-{len(names) + 1}>")
            ),
            str(result["error"]),
        )
        return {**result, "error": error}
    return {
        **result,
        "messages": walk(result.get("messages")),
        "state": walk(result.get("state")),
    }


def assert_same_result(
    ours: dict[str, Any],
    expected: dict[str, Any],
    case: dict[str, Any],
    *,
    spec_overrides: bool = True,
) -> None:
    """Raise AssertionError unless *ours* equals the reference's *expected* result for *case*.

    Minted ids are normalised on both sides, then the results are compared with
    :func:`comparable`; the message shows both results.
    """
    ours = normalise_minted_ids(ours, case)
    expected = normalise_minted_ids(expected, case)
    if comparable(ours, spec_overrides=spec_overrides) != comparable(
        expected, spec_overrides=spec_overrides
    ):
        raise AssertionError(
            f"{case.get('name')}: results differ{describe_mismatch(ours, expected)}"
        )


def describe_mismatch(ours: dict[str, Any], expected: dict[str, Any], label: str = "ours") -> str:
    """A readable account of two differing results, for assertion messages."""

    def show(result: dict[str, Any]) -> str:
        if "error" in result:
            return f"error: {result['error']}"
        body = {"messages": result.get("messages"), "state": result.get("state")}
        return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False)

    return f"\n--- {label} ---\n{show(ours)}\n--- reference ---\n{show(expected)}"
