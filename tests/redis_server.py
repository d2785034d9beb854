"""A real redis-server for the tests: started in a temporary directory, persistence on.

``RedisServer`` listens on 127.0.0.1 at a free port, with the append-only file on and
``appendfsync always`` (every acknowledged write is on disk, so a SIGKILL of the server loses
nothing that was acknowledged). :meth:`RedisServer.restart` kills it and starts it again from its
AOF, on the same port. Where no ``redis-server`` can be found the tests that need it skip with
the reason, except when ``CI`` is set: there they fail (``.ci/run`` installs it).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.needs import missing

__all__ = ["RedisServer", "redis_server_binary"]


def redis_server_binary() -> str:
    """The path of redis-server, or skip (outside CI) / fail (in CI)."""
    found = shutil.which("redis-server")
    if found:
        return found
    reason = (
        "redis-server is not installed: the Redis tests cannot run "
        "(apt-get install redis-server; .ci/run installs it)"
    )
    missing(reason)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(
        self, directory: Path, *, fsync: str = "always", options: tuple[str, ...] = ()
    ) -> None:
        self.binary = redis_server_binary()
        self.directory = directory
        self.port = free_port()
        self.fsync = fsync
        self.options = options  # more arguments, such as ("--proto-max-bulk-len", "1mb")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.fsync,
            "--save",
            "",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            *self.options,
        ]
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    "redis-server exited: " + (self.directory / "redis.log").read_text()[-2000:]
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start within 20 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        """SIGKILL, then start again from the append-only file on the same port."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None
