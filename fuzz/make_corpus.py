"""Write the seed corpus (fuzz/corpus): every frame of examples/streams, hostile frames, and
for the framing (its first byte picks the limit, see fuzz_scan.c) the head of every stream
and hostile chunks."""

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
#: Content deltas in the form producers write (the core's shape, _shape.h), and near misses.
SHAPES = [
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":" the"}',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\xc3\xa9\xf0\x9f\x98\x80 more words"}',
    b'{"type":"REASONING_MESSAGE_CONTENT","messageId":"rsn-6","delta":" more"}',
    b'{"type":"TOOL_CALL_ARGS","toolCallId":"call-1","delta":"{\\"q\\":"}',
    b'{ "delta": "x", "messageId": "m", "type": "TEXT_MESSAGE_CONTENT" }',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\tb"}',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\n\\u00e9\\"","metadata":{"k":[1]}}',
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\\ud83d\\ude00\\/"}',
]
FRAMING = [
    b"\xffdata: {}\n\ndata: [1]\n\n",
    b"\x07data: 12\n\ndata: 1234567\n\n",
    b"\xffdata: a\r\n\r\ndata: b\n\nevent: x\n",
    b"\xff{}\n \t\n[1]\n\xc3\xa9\n\xed\xa0\x80\n",
    b"\x03{}\n1234\n",
]


def main() -> None:
    seeds = set(HOSTILE) | set(SHAPES)
    for path in sorted((ROOT / "examples" / "streams").iterdir()):
        if path.suffix == ".jsonl":
            seeds.update(line for line in path.read_bytes().splitlines() if line.strip())
        elif path.suffix == ".sse":
            for line in path.read_bytes().splitlines():
                if line.startswith(b"data: "):
                    seeds.add(line[6:])
        if path.suffix in (".jsonl", ".sse"):
            seeds.add(b"\xff" + path.read_bytes()[:2000])
    seeds.update(FRAMING)
    out = ROOT / "fuzz" / "corpus"
    out.mkdir(exist_ok=True)
    for seed in seeds:
        (out / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    main()
