"""Write the seed corpus (fuzz/corpus): every frame of examples/streams, and hostile frames."""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = [
    b'{"a":1,"a":2}',
    b'{"a":"\\ud800"}',
    b"[" * 129 + b"]" * 129,
    b'{"a":"\\u003a"}',
    b'{"a":12345678901234567890}',
    b'{"a\\u0062":1,"ab":2}',
    b'{"a":"\xed\xa0\x80"}',
]


def main() -> None:
    seeds = set(HOSTILE)
    for path in sorted((ROOT / "examples" / "streams").iterdir()):
        if path.suffix == ".jsonl":
            seeds.update(line for line in path.read_bytes().splitlines() if line.strip())
        elif path.suffix == ".sse":
            for line in path.read_bytes().splitlines():
                if line.startswith(b"data: "):
                    seeds.add(line[6:])
    out = ROOT / "fuzz" / "corpus"
    out.mkdir(exist_ok=True)
    for seed in seeds:
        (out / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    main()
