"""The public API's types, as a user's type checker sees them (mypy on ``tests/typing/``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "typing" / "public_api.py"


def test_reveal_type_shows_what_the_comments_say() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(EXAMPLES)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    revealed = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r":(\d+): note: Revealed type is \"(.*)\"", result.stdout)
    }
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert not errors, result.stdout
    expected = {
        n: line.split("#", 1)[1].strip()
        for n, line in enumerate(EXAMPLES.read_text().splitlines(), 1)
        if "reveal_type(" in line and "#" in line
    }
    assert len(expected) >= 10
    assert revealed == expected
