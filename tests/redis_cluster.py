"""A real Redis Cluster for the tests: three masters on 127.0.0.1, started and joined here.

Each node is a ``redis-server --cluster-enabled yes`` in a directory of its own, on a free
port; ``redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`` assigns the 16384
slots over the three. Where redis-server or redis-cli cannot be found (or the cluster does not
come up), the tests that need it skip with the reason, except when ``CI`` is set: there they
fail.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.needs import missing
from tests.redis_server import RedisServer

__all__ = ["RedisClusterNodes"]


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_port(taken: set[int]) -> int:
    """A free port at most 55535 whose bus port (10000 above) is free too."""
    for _ in range(200):
        port = random.randint(20000, 55535)
        if port not in taken and port + 10000 not in taken and _free(port) and _free(port + 10000):
            return port
    missing("no free pair of ports (N, N + 10000) for a Redis Cluster node")


class RedisClusterNodes:
    """Three cluster-enabled redis-servers, joined into one cluster by :meth:`start`."""

    def __init__(self, directory: Path, masters: int = 3) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            missing("redis-cli is not installed: the Redis Cluster tests cannot create a cluster")
        self.cli = cli
        self.nodes = []
        taken: set[int] = set()
        for n in range(masters):
            home = directory / f"node{n}"
            home.mkdir()
            self.nodes.append(
                RedisServer(
                    home,
                    fsync="everysec",
                    options=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                )
            )
            port = self.nodes[-1].port = _cluster_port(taken)
            taken |= {port, port + 10000}

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> None:
        try:
            for node in self.nodes:
                node.start()
        except BaseException:
            self.stop()  # no node left behind
            raise
        create = [self.cli, "--cluster", "create"]
        create += [f"127.0.0.1:{node.port}" for node in self.nodes]
        create += ["--cluster-replicas", "0", "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            self.stop()
            missing(f"redis-cli --cluster create failed: {done.stdout[-500:]} {done.stderr[-500:]}")
        deadline = time.monotonic() + 30
        while True:
            info = subprocess.run(
                [self.cli, "-p", str(self.nodes[0].port), "cluster", "info"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout
            if "cluster_state:ok" in info:
                return
            if time.monotonic() > deadline:
                self.stop()
                missing(f"the Redis Cluster did not come up: {info[:300]}")
            time.sleep(0.1)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
