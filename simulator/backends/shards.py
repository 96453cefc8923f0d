"""A cluster's backends, one per shard, seen by the run as one backend: its
counts summed, its recording shared, all of them closed together."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import redis

from simulator.backends import CLUSTER_KINDS, BackendSpec, lab_client, open_redis_backend
from simulator.backends.engine import ENGINE
from simulator.backends.functions_library import FunctionsLibrary
from simulator.backends.local_cluster import (
    ClusterUnavailable,
    ThrowawayCluster,
    cluster_server,
    missing_server,
)
from simulator.backends.redis_backend import EMBEDDED_NAMESPACE, BackendError, RedisBackend


def _summed(count: str) -> property:
    """A count of every shard's backend, added up."""
    return property(lambda shards: sum(getattr(backend, count) for backend in shards.backends))


class ShardBackends:
    """The backends of a cluster's shards (shard ``i`` runs on ``backends[i]``),
    and the throwaway cluster under them, if the lab started one."""

    def __init__(self, backends: list[RedisBackend], cluster: Any = None) -> None:
        if not backends:
            raise ValueError("a cluster has at least one shard")
        self.backends = backends
        self.cluster = cluster
        first = backends[0]
        self.name = first.name
        self.namespace = first.namespace
        self.as_embedded = first.as_embedded

    def __iter__(self):
        return iter(self.backends)

    executed = _summed("executed")
    store_commands = _summed("store_commands")
    script_errors = _summed("script_errors")
    backend_seconds = _summed("backend_seconds")

    @property
    def recording(self) -> list | None:
        return self.backends[0].recording

    @recording.setter
    def recording(self, scripts: list | None) -> None:
        for backend in self.backends:
            backend.recording = scripts

    def server_script_seconds(self) -> float | None:
        seconds = [backend.server_script_seconds() for backend in self.backends]
        return None if None in seconds else sum(seconds)

    @property
    def leftovers(self) -> str:
        return "; ".join(left for backend in self.backends if (left := backend.leftovers))

    def close(self) -> None:
        """Close every shard's backend, then stop the throwaway cluster; the
        first failure is raised once all were tried."""
        failure: Exception | None = None
        for backend in self.backends:
            try:
                backend.close()
            except Exception as error:  # noqa: BLE001 - the others still close
                failure = failure or error
        if self.cluster is not None:
            self.cluster.stop()
        if failure is not None:
            raise failure

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a cluster's backends have no single {name!r}: ask a shard's")


def open_shard_backends(spec: BackendSpec, shards: int,
                        replicas_per_shard: int) -> ShardBackends:
    """A cluster's backends: a fresh fakeredis or engine server per shard, or the primaries of
    a throwaway ``redis-cluster`` or ``valkey-cluster`` of that shape, each
    under the lab's ``lab:`` prefix (so a key hashes to the same slot on both)."""
    if spec.kind in ("fakeredis", ENGINE):
        return _each_opened(lambda _: open_redis_backend(spec), shards)
    if spec.kind not in CLUSTER_KINDS:
        raise ValueError(f"a cluster runs on the lab's engine or fakeredis (a server per shard) or "
                         f"on 'redis-cluster' or 'valkey-cluster' (a throwaway local cluster), "
                         f"not on {spec}")
    if shards < 3:
        raise ValueError(f"a real cluster has at least 3 primaries (a majority of them "
                         f"decides a failover; redis-cli --cluster create refuses fewer too), "
                         f"and the scenario asks for {shards}")
    server = cluster_server(spec.kind)
    if server is None:
        raise ClusterUnavailable(missing_server(spec.kind))
    cluster = ThrowawayCluster(server, shards, replicas_per_shard)
    try:
        opened = _each_opened(lambda shard: _cluster_node(cluster.urls[shard], spec.kind),
                              shards)
    except BaseException:
        cluster.stop()
        raise
    opened.cluster = cluster
    return opened


def _each_opened(open_one: Callable[[int], RedisBackend], shards: int) -> ShardBackends:
    """Every shard's backend, or none: those opened are closed when one fails."""
    opened: list[RedisBackend] = []
    try:
        for shard in range(shards):
            opened.append(open_one(shard))
    except BaseException:
        if opened:
            ShardBackends(opened).close()
        raise
    return ShardBackends(opened)


def _cluster_node(url: str, kind: str) -> RedisBackend:
    """A primary of the lab's own throwaway cluster, with the run's library loaded."""
    client = lab_client(url)
    token = secrets.token_hex(6)
    try:
        library = FunctionsLibrary.offered(client, f"lab_{token}")
    except (redis.exceptions.ConnectionError, OSError) as error:
        raise BackendError(f"cannot reach the cluster's node {url}: {error}") from error
    backend = RedisBackend(client, kind, namespace=EMBEDDED_NAMESPACE,
                           owns_server=True, library=library)
    backend.native_cluster = True
    backend.address = url.removeprefix("redis://").rsplit("/", 1)[0]
    backend.node_id = client.execute_command("CLUSTER", "MYID")
    return backend
