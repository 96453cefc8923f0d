"""A throwaway Redis Cluster the lab starts and owns: ``redis-server
--cluster-enabled yes`` nodes on free loopback ports, joined by ``redis-cli
--cluster create``, no disk, stopped (and their directory removed) when done.

What ``--backend redis-cluster`` runs on, shaped as the scenario's ``[server]
cluster`` says, and what the cluster contract tests use. The primaries are
listed first to ``redis-cli``, so each serves the slots ``slot_ranges`` gives
its position (the simulated cluster's shards, in the same order).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from simulator.backends.local_postgres import setpriv_ties
from simulator.backends.local_server import names_its_directory
from simulator.backends.redis_backend import BackendError
from simulator.backends.slots import slot_ranges

NODE_CONFIG = """port {port}
bind 127.0.0.1
save ""
appendonly no
dir {dir}
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
"""
"""A node's ``redis.conf``: no disk but the cluster's own ``nodes.conf``."""
READY_WITHIN_S = 30
"""How long the nodes have to agree that every slot is served."""


BUS_OFFSET = 10_000
"""A cluster node also listens on its port + 10,000 (the cluster bus)."""


def free_node_port(taken: set[int]) -> int:
    """A loopback port free now whose bus port (+10,000) is free too: below
    55,536, where the kernel's ephemeral ports would not leave room for it."""
    rng = random.SystemRandom()  # not the run's streams: only keeps concurrent clusters apart
    for _ in range(1_000):
        port = rng.randrange(20_000, 45_000)
        if port in taken or port + BUS_OFFSET in taken:
            continue
        if all(_bindable(candidate) for candidate in (port, port + BUS_OFFSET)):
            return port
    raise ClusterUnavailable("no free pair of loopback ports for a cluster node")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_binaries() -> tuple[str, str] | None:
    """``redis-server`` and ``redis-cli``, or None when either is missing."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    return (server, cli) if server and cli else None


class ClusterUnavailable(BackendError):
    """The cluster could not be started; the message says why."""


class ThrowawayCluster:
    """``shards`` primaries with ``replicas_per_shard`` replicas each."""

    def __init__(self, shards: int, replicas_per_shard: int = 0) -> None:
        binaries = cluster_binaries()
        if binaries is None:
            raise ClusterUnavailable("a Redis Cluster needs redis-server and redis-cli "
                                     "installed (Debian: apt-get install redis-server)")
        server, cli = binaries
        self.shards = shards
        self.directory = Path(tempfile.mkdtemp(prefix="lab-redis-cluster-"))
        self.ports: list[int] = []
        for _ in range(shards * (1 + replicas_per_shard)):
            self.ports.append(free_node_port({*self.ports, *(p + BUS_OFFSET for p in self.ports)}))
        self.processes: list[subprocess.Popen] = []
        try:
            for port in self.ports:
                node = self.directory / str(port)
                node.mkdir()
                # The settings in a file in the node's directory, which the
                # process title names: `clean` keeps a directory a live process names.
                config = node / "redis.conf"
                config.write_text(NODE_CONFIG.format(port=port, dir=node), encoding="utf-8")
                title = names_its_directory(server, node)
                # Tied to the lab's life: a run killed outright leaves no node behind.
                tie = ["setpriv", "--pdeathsig", "TERM"] if setpriv_ties() else []
                self.processes.append(subprocess.Popen(
                    [*tie, server, str(config), *title],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self._wait(lambda client: client.ping())
            created = subprocess.run(
                [cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.ports),
                 "--cluster-replicas", str(replicas_per_shard), "--cluster-yes"],
                capture_output=True, text=True, timeout=60)
            if created.returncode != 0:
                raise ClusterUnavailable(f"redis-cli --cluster create failed: "
                                         f"{created.stdout[-500:]}{created.stderr[-500:]}")
            self._wait(lambda client: client.cluster("info")["cluster_state"] == "ok")
            self.primaries = self._primaries()
        except BaseException:
            self.stop()
            raise

    def _wait(self, ready) -> None:
        deadline = time.monotonic() + READY_WITHIN_S
        for port in self.ports:
            client = redis.Redis(port=port, socket_timeout=1)
            try:
                while True:
                    try:
                        if ready(client):
                            break
                    except (redis.exceptions.RedisError, OSError):
                        pass
                    if time.monotonic() > deadline:
                        raise ClusterUnavailable(f"node 127.0.0.1:{port} not ready within "
                                                 f"{READY_WITHIN_S} s")
                    time.sleep(0.05)
            finally:
                client.close()

    def _primaries(self) -> list[int]:
        """The primaries' ports, in the order of the slot ranges they serve,
        checked against the ranges the simulated cluster gives its shards."""
        client = redis.Redis(port=self.ports[0], decode_responses=True)
        try:
            served = sorted((int(start), int(end), int(node[1]))
                            for start, end, node, *_ in client.execute_command("CLUSTER SLOTS"))
        finally:
            client.close()
        expected = [(served_range.start, served_range.stop - 1)
                    for served_range in slot_ranges(self.shards)]
        if [(start, end) for start, end, _ in served] != expected:
            raise ClusterUnavailable(f"the cluster serves slots {served}, not {expected}")
        return [port for _, _, port in served]

    @property
    def urls(self) -> list[str]:
        """The primaries' URLs, shard 0 first."""
        return [f"redis://127.0.0.1:{port}/0" for port in self.primaries]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)
