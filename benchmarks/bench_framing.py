"""Throughput of the framing layer: frames per second for SSE and JSON lines.

Run from the repository root: ``python -m benchmarks.bench_framing``.
"""

from __future__ import annotations

import time

from agui_meta._framing import JsonLinesDecoder, SSEDecoder, encode_jsonl, encode_sse

N = 100_000
CHUNK = 65536
PAYLOAD = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"Hello, world"}'


def chunks(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def bench(
    name: str,
    make: type[SSEDecoder | JsonLinesDecoder],
    stream: bytes,
    parts: list[bytes] | None = None,
) -> None:
    parts = parts or chunks(stream, CHUNK)
    best = float("inf")
    for _ in range(5):
        decoder = make()
        t0 = time.perf_counter()
        count = 0
        for part in parts:
            count += len(decoder.feed(part))
        count += len(decoder.close())
        best = min(best, time.perf_counter() - t0)
        assert count == N, count
    print(f"{name:40s} {N / best:12,.0f} frames/s  {len(stream) / best / 2**20:8.1f} MiB/s")


def main() -> None:
    sse = b"".join(encode_sse(PAYLOAD) for _ in range(N))
    bench("SSE, LF, 64 KiB chunks", SSEDecoder, sse)
    one = encode_sse(PAYLOAD)
    bench("SSE, one event per chunk", SSEDecoder, sse, [one] * N)
    bench("SSE, CRLF, 64 KiB chunks", SSEDecoder, sse.replace(b"\n", b"\r\n"))
    bench(
        "SSE, event+id lines, 64 KiB chunks",
        SSEDecoder,
        b"".join(encode_sse(PAYLOAD, event="message", id=str(i)) for i in range(N)),
    )
    nonascii = PAYLOAD.replace(b"world", "wörld".encode())
    bench("SSE, non-ASCII payload", SSEDecoder, b"".join(encode_sse(nonascii) for _ in range(N)))
    bench("JSON lines, 64 KiB chunks", JsonLinesDecoder, encode_jsonl(PAYLOAD) * N)
    bench("JSON lines, CRLF", JsonLinesDecoder, (PAYLOAD + b"\r\n") * N)


if __name__ == "__main__":
    main()
