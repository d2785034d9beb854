"""The code blocks of README.md and docs/*.md, for the tests that run or check them.

:func:`python_blocks` gives every ```` ```python ```` block with its file and line;
:func:`doc_block` the one block that contains a marker (for a test that runs a block's
function against a server of its own); :func:`shell_lines` every command line shown in a shell
block or indented in the text. The conventions a block follows are in docs/index.md
("Conventions for the examples in these pages").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

__all__ = ["DOC_FILES", "ROOT", "Block", "doc_block", "python_blocks", "shell_lines"]

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", flags=re.DOTALL | re.MULTILINE)


class Block(NamedTuple):
    path: str  # relative to the repository root, as in README.md and docs/*.md
    line: int  # of the block's first line of code, 1-based
    language: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match.group(1))
        code = "".join(line[indent:] for line in match.group(3).splitlines(keepends=True))
        line = text.count("\n", 0, match.start(3)) + 1
        found.append(Block(path.relative_to(ROOT).as_posix(), line, match.group(2), code))
    return found


def python_blocks() -> list[Block]:
    return [b for path in DOC_FILES for b in blocks(path) if b.language == "python"]


def doc_block(marker: str) -> Block:
    """The one Python block of README.md or docs/*.md that contains ``marker``."""
    found = [b for b in python_blocks() if marker in b.code]
    assert len(found) == 1, f"{marker!r} is in {len(found)} Python blocks of the docs"
    return found[0]


def shell_lines() -> list[tuple[str, str]]:
    """(where, command) for each line of a ```sh block or indented by 4 spaces in the text."""
    found: list[tuple[str, str]] = []
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        spans = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
        for block in blocks(path):
            if block.language in ("sh", "bash", "console"):
                for n, line in enumerate(block.code.splitlines()):
                    if line.strip() and not line.lstrip().startswith("#"):
                        found.append((f"{rel}:{block.line + n}", line.strip()))
        offset = 0
        for n, line in enumerate(text.splitlines(keepends=True), start=1):
            inside = any(start <= offset < end for start, end in spans)
            offset += len(line)
            if not inside and line.startswith("    ") and line.strip():
                found.append((f"{rel}:{n}", line.strip()))
    return found
