"""What the wheel installs: the package ``agui_meta`` only, at the version it reports."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import agui_meta

ROOT = Path(__file__).resolve().parent.parent


def test_the_version_is_a_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc|\.dev|\.post)\d+)?", agui_meta.__version__)
    assert "__version__" not in agui_meta.__all__  # a module attribute, as in httpx


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools", reason="the build backend (test extra)")
    # A copy of the sources the wheel is made of, so that no build output lands in the tree.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyd")
    for folder in ("agui_meta", "benchmarks", "tests", "examples"):
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    result = subprocess.run(
        [*pip, "--no-index", "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_installs_agui_meta_only(wheel: zipfile.ZipFile) -> None:
    top = {name.split("/", 1)[0] for name in wheel.namelist()}
    dist_info = {name for name in top if name.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert top - dist_info == {"agui_meta"}
    names = set(wheel.namelist())
    assert "agui_meta/py.typed" in names
    assert "agui_meta/redis/__init__.py" in names and "agui_meta/cli/__init__.py" in names
    # The optional C core: built where this interpreter has it, its source left out.
    from agui_meta import _speedups

    assert "agui_meta/_native.c" not in names and "agui_meta/_native.pyi" in names
    built = [n for n in names if n.startswith("agui_meta/_native.") and n.endswith((".so", ".pyd"))]
    assert len(built) == (_speedups.NATIVE is not None)


def test_the_wheel_has_the_version_the_package_reports(wheel: zipfile.ZipFile) -> None:
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    assert f"\nVersion: {agui_meta.__version__}\n" in text
    assert metadata.startswith(f"agui_meta-{agui_meta.__version__}.dist-info/")
