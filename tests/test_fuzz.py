"""The C core's fuzz targets, each for a bounded time (``fuzz/``; marked slow).

- ``fuzz/fuzz_scan.c``: libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer on the scan
  and the framing of the common SSE and JSON-lines shapes (``_frame.h``) (needs clang with libFuzzer: ``.ci/run`` installs Debian's clang-14 and libclang-rt-14-dev);
- ``fuzz/fuzz_native.py``: atheris, the C core (its framing included) against the pure-Python
  path on every input.

Both start from the seed corpus (a copy: the fuzzers add to the corpus they are given). A crash,
a leak, a sanitizer report or a difference fails the test. Missing tools skip outside CI and
fail in CI (``tests/needs.py``).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import missing, native_core

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
SECONDS = 30

pytestmark = pytest.mark.slow


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "corpus", corpus)
    return corpus


def test_the_scan_under_libfuzzer_asan_and_ubsan(tmp_path: Path) -> None:
    clang = shutil.which("clang-14") or shutil.which("clang")
    if clang is None:
        missing("clang with libFuzzer (apt-get install clang-14 libclang-rt-14-dev)")
    target = tmp_path / "fuzz_scan"
    flags = ["-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=undefined"]
    built = subprocess.run(
        [clang, *flags, str(FUZZ / "fuzz_scan.c"), "-o", str(target)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if built.returncode != 0 and "libclang_rt.fuzzer" in built.stderr + built.stdout:
        missing(f"libFuzzer's runtime (libclang-rt-14-dev): {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr
    done = subprocess.run(
        [
            str(target),
            f"-max_total_time={SECONDS}",
            "-max_len=4096",
            "-detect_leaks=1",
            str(_corpus(tmp_path)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=SECONDS + 120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Done " in done.stderr


def test_the_core_against_the_python_path_under_atheris(tmp_path: Path) -> None:
    native_core()
    if importlib.util.find_spec("atheris") is None:
        missing("atheris (pip install atheris)")
    done = subprocess.run(
        [
            sys.executable,
            str(FUZZ / "fuzz_native.py"),
            str(_corpus(tmp_path)),
            f"-max_total_time={SECONDS}",
            "-max_len=2048",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=SECONDS + 120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Done " in done.stderr
