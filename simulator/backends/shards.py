"""A cluster's backends, one per shard, seen by the run as one backend: its
counts summed, its recording shared, all of them closed together."""

from __future__ import annotations

from typing import Any

from simulator.backends.redis_backend import RedisBackend


class ShardBackends:
    """The backends of a cluster's shards (shard ``i`` runs on ``backends[i]``)."""

    def __init__(self, backends: list[RedisBackend]) -> None:
        if not backends:
            raise ValueError("a cluster has at least one shard")
        self.backends = backends
        first = backends[0]
        self.name = first.name
        self.namespace = first.namespace
        self.as_embedded = first.as_embedded

    def __iter__(self):
        return iter(self.backends)

    @property
    def executed(self) -> int:
        return sum(backend.executed for backend in self.backends)

    @property
    def store_commands(self) -> int:
        return sum(backend.store_commands for backend in self.backends)

    @property
    def script_errors(self) -> int:
        return sum(backend.script_errors for backend in self.backends)

    @property
    def backend_seconds(self) -> float:
        return sum(backend.backend_seconds for backend in self.backends)

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
        """Close every shard's backend; the first failure is raised once all were tried."""
        failure: Exception | None = None
        for backend in self.backends:
            try:
                backend.close()
            except Exception as error:  # noqa: BLE001 - the others still close
                failure = failure or error
        if failure is not None:
            raise failure

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a cluster's backends have no single {name!r}: ask a shard's")
