"""What many test modules share: stream encoders, the command line run as a user runs it, and a
real ``redis-server`` for a module.

- :func:`sse` / :func:`jsonl`: events as the bytes of an SSE or JSON-lines stream;
  :func:`random_chunks`: bytes cut into chunks of random sizes;
- :func:`cli`: :func:`agui_meta.cli.main` in this process with its standard streams as pipes
  (neither output a terminal, ``NO_COLOR`` unset); :func:`cli_process`: the same in a new
  ``python -m agui_meta`` process; :func:`cli_in_process`: ``main`` with its output read
  from ``capsys``;
- :class:`Terminal`: the command on a pseudo-terminal that is its controlling terminal;
- :func:`redis_server`: a ``redis-server`` on 127.0.0.1 (``tests/redis_server.py``) for a
  fixture, stopped however the block ends; skipped (or failed in CI) without the redis extra.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.oracle import REPO_ROOT
from tests.redis_server import RedisServer, free_port

__all__ = [
    "TIMEOUT",
    "Terminal",
    "cli",
    "cli_in_process",
    "cli_process",
    "free_port",
    "jsonl",
    "redis_server",
    "sse",
    "uvicorn_process",
]

#: Seconds a command run by the tests may take before the test fails.
TIMEOUT = 60


def sse(events: Iterable[Mapping[str, Any]]) -> bytes:
    """The events as SSE: one ``data:`` line each, then a blank line."""
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def jsonl(events: Iterable[Mapping[str, Any]]) -> bytes:
    """The events as JSON lines."""
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def random_chunks(data: bytes, seed: int) -> list[bytes]:
    """``data`` cut into chunks of sizes from 1 byte to 4 KiB, chosen by ``seed``."""
    rng = random.Random(seed)
    chunks, at = [], 0
    while at < len(data):
        size = rng.choice((1, 2, 3, 7, 64, 500, 4096))
        chunks.append(data[at : at + size])
        at += size
    return chunks


def python_child(code: str, *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter in the repository's root (for what must not share
    this process: a measurement of its own, or a failure that is a crash); never raises for
    its exit status."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment.update(env or {})
    return environment


def cli(
    *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`agui_meta.cli.main` with ``args`` in this process, its standard input, output
    and error as pipes would be (bytes, not terminals), ``NO_COLOR`` unset: what
    :func:`cli_process` gives, without starting an interpreter (a third of a second each).

    An exception that escapes ``main`` fails the test (a real process would print a
    traceback and exit 1).
    """
    from agui_meta.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    saved = (sys.stdin, sys.stdout, sys.stderr)
    saved_environment = dict(os.environ)
    os.environ.clear()
    os.environ.update(_environment(env))
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        status = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.environ.clear()
        os.environ.update(saved_environment)
    return subprocess.CompletedProcess(
        ["agui-meta", *args], status, out.getvalue().decode(), err.getvalue().decode()
    )


def cli_process(
    *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m agui_meta ARGS`` in a new process, with pipes (neither output a terminal)."""
    done = subprocess.run(
        [sys.executable, "-m", "agui_meta", *args],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        env=_environment(env),
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    )


def cli_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """:func:`agui_meta.cli.main` with ``args`` in this process: (status, stdout, stderr)."""
    from agui_meta.cli import main

    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


class Terminal:
    """The command on a pseudo-terminal: standard input, output and error, controlling it."""

    def __init__(self, *args: str, env: Mapping[str, str] | None = None) -> None:
        import fcntl
        import pty
        import termios

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agui_meta", *args],
            cwd=REPO_ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=_environment({"TERM": "xterm", **(env or {})}),
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),  # noqa: PLW1509
        )
        os.close(slave)
        self.output = b""

    def read_until_exit(self) -> tuple[int, bytes]:
        try:
            while True:
                ready, _, _ = select.select([self.master], [], [], TIMEOUT)
                if not ready:
                    break
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the other side closed (Linux: EIO)
                    break
                if not chunk:
                    break
                self.output += chunk
        finally:
            os.close(self.master)
            status = self.proc.wait(timeout=TIMEOUT)
        return status, self.output

    def wait_reading_standard_input(self) -> None:
        """Until the command is blocked in read(0, ...), as it is waiting for typed input."""
        for _ in range(TIMEOUT * 100):
            try:
                with open(f"/proc/{self.proc.pid}/syscall") as f:
                    fields = f.read().split()
            except OSError:
                fields = []
            if fields[:2] == ["0", "0x0"]:
                return
            select.select([], [], [], 0.01)  # a poll interval, not a measured time
        pytest.fail("the command never read its standard input")


@contextlib.contextmanager
def redis_server(directory: Path, *, fsync: str = "always") -> Iterator[RedisServer]:
    """A started ``redis-server`` keeping its files in ``directory``; stopped after the block."""
    needs.module("redis", reason="the redis extra is not installed: the Redis tests cannot run")
    server = RedisServer(directory, fsync=fsync)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def uvicorn_process(
    factory: str, env: Mapping[str, str], *, log: Path | None = None, guard: float = TIMEOUT
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The app that ``factory`` (``module:function``) makes, served by uvicorn in a process of
    its own on 127.0.0.1, with ``env`` added to the environment; its standard error into
    ``log`` when given. Yields (its URL, the process), to be killed; killed after the block.
    ``guard``: seconds it may take to start (a hang guard, not a timing assertion)."""
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", "--factory", factory]
    args += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    errors = open(log, "wb") if log is not None else None  # noqa: SIM115 - the child's
    process = subprocess.Popen(args, cwd=REPO_ROOT, env={**os.environ, **env}, stderr=errors)
    if errors is not None:
        errors.close()
    try:
        deadline = time.monotonic() + guard
        while True:
            assert process.poll() is None, f"{factory} exited while starting"
            assert time.monotonic() < deadline, f"{factory} did not start"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)  # a poll interval, not a measured time
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(guard)
