"""What every server node answers about the nodes a call or a fault reaches.

The network sends a call to ``server.node_for(command)`` and a server fault
hits ``server.nodes(shard)``: a server that is one node (a Redis server, a
service) answers itself; a cluster answers its shards
(``simulator.net.cluster``).
"""

from __future__ import annotations

from typing import Any


class OneNode:
    """A server that is a single node. Its ``down`` flag, ``extra_latency_us``
    and ``spike_ends`` (the ends of the latency spikes in force) are its own."""

    down: bool
    extra_latency_us: int
    spike_ends: list[int]

    def node_for(self, command: Any, route: Any = None, known: Any = None) -> Any:
        """The node that answers ``command``: this one (a cluster's client
        may name a shard, ``route``, or the slots it knows moved, ``known``)."""
        return self

    def nodes(self, shard: int | None = None) -> list[Any]:
        """The nodes a server fault hits: this one (only a cluster has shards)."""
        if shard is not None:
            raise ValueError(f"shard {shard}: this server is not a cluster")
        return [self]
