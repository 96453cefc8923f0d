"""A Redis Cluster in the simulation: a server node per shard, keys routed
by hash slot.

Rules kept here:

* Each shard is a ``Server`` of its own, on a backend of its own: its own
  queue, script cache, writes history (so its own persistence on a restart),
  ``down`` flag and latency. Shard ``i`` serves the ``i``-th range of
  ``slot_ranges`` (as ``redis-cli --cluster create`` splits the slots).
* A command goes to the shard of its first key's slot, as a cluster client
  routes it. Its keys must all hash to one slot, or the node answers
  ``CROSSSLOT`` without running it (Redis 7 checks a function's and a
  script's declared keys so; it counts as a script error, the store's).
* A keyless command goes to shard 0, as a cluster client sends it to one node
  (so a ``SCAN`` sees that node's keys only), except ``SCRIPT LOAD``, which
  cluster clients send to every primary.
* Slots are computed on a key as the server has it. The embedded backend
  and a throwaway real cluster keep a run's keys under the same ``lab:``, so
  a key lands on the same shard on both; a cluster the lab did not start
  has the run's own prefix in every name, so untagged keys may land elsewhere.
* Shards run unpipelined: a queue per shard could run the oracle's facts out
  of their virtual-time order across shards.
"""

from __future__ import annotations

from array import array
from typing import Any

from simulator.backends import Outcome
from simulator.backends.slots import CROSSSLOT, HASH_SLOTS, slot_of, slot_ranges
from simulator.engine.trace import Trace
from simulator.net.server import Command, Server

BROADCAST = frozenset({"SCRIPT LOAD"})
"""Keyless commands a cluster client sends to every primary."""


class ClusterServer:
    """The shards of a cluster, seen by the links, the faults and the oracle
    as one server: each call goes to its key's node (``node_for``)."""

    def __init__(self, shards: list[Server]) -> None:
        if not shards:
            raise ValueError("a cluster has at least one shard")
        self.shards = shards
        for shard in shards:
            shard.whole = self
        self.ranges = slot_ranges(len(shards))
        for shard, served in zip(shards, self.ranges, strict=True):
            shard.backend.served_slots = served
        self._shard_of_slot = array("H", bytes(2 * HASH_SLOTS))
        for index, served in enumerate(self.ranges):
            for slot in served:
                self._shard_of_slot[slot] = index
        first = shards[0]
        self.kernel = first.kernel
        self.backend = first.backend  # every shard's has the same namespace
        self.trace: Trace = first.trace
        self.crossslot_refusals = 0
        self._broadcast = _Broadcast(self)

    # -- routing -----------------------------------------------------------

    def slot(self, redis_key: str) -> int:
        """The key's hash slot, on its name as the server has it (on the
        embedded backend and a throwaway cluster, under the same ``lab:``)."""
        return slot_of(redis_key)

    def shard_index(self, redis_key: str) -> int:
        return self._shard_of_slot[self.slot(redis_key)]

    def shard_of(self, redis_key: str) -> Server:
        return self.shards[self.shard_index(redis_key)]

    def node_for(self, command: Command) -> Any:
        """The node that answers ``command``: its first key's shard, a refusal
        when its keys span slots, every shard for a broadcast."""
        keys = command.keys
        if not keys:
            return self._broadcast if command.verb in BROADCAST else self.shards[0]
        slot = self.slot(keys[0])
        shard = self.shards[self._shard_of_slot[slot]]
        for key in keys[1:]:
            if self.slot(key) != slot:
                return _CrossSlot(self, shard)
        return shard

    def nodes(self, shard: int | None = None) -> list[Server]:
        """The nodes a server fault hits: ``shard``'s, or every one."""
        return list(self.shards) if shard is None else [self.shards[shard]]

    def execute(self, command: Command, tag: int = -1) -> Any:
        return self.node_for(command).execute(command, tag)

    # -- what the run and the oracle read ------------------------------------

    def flush(self) -> None:
        for shard in self.shards:
            shard.flush()

    def after_queued(self, effect: Any, args: tuple) -> None:
        effect(*args)  # the shards run unpipelined: nothing is ever queued

    def expire_due(self, now_us: int) -> None:
        for shard in self.shards:
            shard.expire_due(now_us)

    def deadline_us(self, redis_key: str) -> int | None:
        return self.shard_of(redis_key).deadline_us(redis_key)

    def read_ledger_keys(self, redis_keys: list[str]) -> dict[str, Any]:
        """Each key read from its own shard; in the order asked."""
        by_shard: dict[int, list[str]] = {}
        for key in redis_keys:
            by_shard.setdefault(self.shard_index(key), []).append(key)
        read: dict[str, Any] = {}
        for index, keys in sorted(by_shard.items()):
            read.update(self.shards[index].read_ledger_keys(keys))
        return {key: read[key] for key in redis_keys}

    def restart(self, keep_until_us: int | None, how: str) -> None:
        """Every shard restarts (the cluster as a whole)."""
        for shard in self.shards:
            shard.restart(keep_until_us, how)

    @property
    def down(self) -> bool:
        return any(shard.down for shard in self.shards)

    @property
    def first_failed(self) -> str | None:
        """The label of the store's first failed call, on whichever shard."""
        failed = [(shard.first_failed_us, index, shard.first_failed)
                  for index, shard in enumerate(self.shards) if shard.first_failed is not None]
        return min(failed)[2] if failed else None

    @property
    def pipelines_sent(self) -> int:
        return sum(shard.pipelines_sent for shard in self.shards)

    @property
    def pipelined_commands(self) -> int:
        return sum(shard.pipelined_commands for shard in self.shards)

    @property
    def keys_expired(self) -> int:
        return sum(shard.keys_expired for shard in self.shards)

    def load(self) -> list[int]:
        """Commands each shard executed (scripts and plain commands)."""
        return [shard.pipelined_commands for shard in self.shards]

class _CrossSlot:
    """The node a command with keys in several slots reaches: it answers
    ``CROSSSLOT`` and runs nothing."""

    def __init__(self, cluster: ClusterServer, shard: Server) -> None:
        self.cluster = cluster
        self.shard = shard
        self.down = shard.down
        self.extra_latency_us = shard.extra_latency_us
        self.backend = shard.backend

    def execute(self, command: Command, tag: int = -1) -> Outcome:
        self.cluster.crossslot_refusals += 1
        self.shard.refused(command.label)
        return Outcome.failed(CROSSSLOT)


class _Broadcast:
    """``SCRIPT LOAD`` sent to every primary: down if any is, as slow as the slowest."""

    def __init__(self, cluster: ClusterServer) -> None:
        self.cluster = cluster
        self.backend = cluster.backend

    @property
    def down(self) -> bool:
        return self.cluster.down

    @property
    def extra_latency_us(self) -> int:
        return max(shard.extra_latency_us for shard in self.cluster.shards)

    def execute(self, command: Command, tag: int = -1) -> Any:
        outcomes = [shard.execute(command, tag) for shard in self.cluster.shards]
        return outcomes[0]


def spread_over_shards(server: Any) -> dict[str, Any]:
    """How a Redis server's work spread over its shards (``CLUSTER_FIGURES``):
    how many; the busiest one's share of the commands every shard ran (the
    hot shard of a v2 namespace); the commands refused for keys in several
    slots. One server is one shard with all of it."""
    if not isinstance(server, ClusterServer):
        return {"shards": 1, "busiest_shard_share": 1.0, "crossslot_refusals": 0}
    load = server.load()
    return {"shards": len(load),
            "busiest_shard_share": round(max(load) / sum(load), 4) if sum(load) else 0.0,
            "crossslot_refusals": server.crossslot_refusals}
