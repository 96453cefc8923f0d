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
* A slot may move to another shard mid-run (``simulator.net.slot_migration``):
  each call then goes where its client believes the slot is, and the node
  there serves it or redirects it. Shards are named ``shard-K:6379`` in
  redirects, on a real cluster too, so they read the same on every backend.
"""

from __future__ import annotations

from array import array
from typing import Any

from simulator.backends import Outcome
from simulator.backends.slots import CROSSSLOT, HASH_SLOTS, slot_of, slot_ranges
from simulator.engine.trace import Trace
from simulator.net.server import Command, Server
from simulator.net.slot_migration import Migrator, SlotMigration, answer

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
        self.addresses = [shard_address(index) for index in range(len(shards))]
        for index, shard in enumerate(shards):
            shard.index = index
        self.native = shards[0].backend.native_cluster
        """A real cluster: its nodes answer redirects themselves."""
        if self.native:
            names = {shard.backend.address: address
                     for shard, address in zip(shards, self.addresses, strict=True)}
            for shard in shards:
                shard.backend.lab_names = names
        self.moved: dict[int, int] = {}
        """Slots a migration moved, and their shard now."""
        self.migration: SlotMigration | None = None
        self.migrator = Migrator(self)

    # -- routing -----------------------------------------------------------

    def slot(self, redis_key: str) -> int:
        """The key's hash slot, on its name as the server has it (on the
        embedded backend and a throwaway cluster, under the same ``lab:``)."""
        return slot_of(redis_key)

    def shard_index(self, redis_key: str) -> int:
        return self.owner(self.slot(redis_key))

    def shard_of(self, redis_key: str) -> Server:
        return self.shards[self.shard_index(redis_key)]


    def owner(self, slot: int) -> int:
        """The shard that serves ``slot`` now (during a migration, the old one)."""
        if self.moved:
            return self.moved.get(slot, self._shard_of_slot[slot])
        return self._shard_of_slot[slot]

    def node_for(self, command: Command, route: tuple[int, bool] | None = None,
                 known: dict[int, int] | None = None) -> Any:
        """The node that answers ``command``: its keys' shard, a refusal when
        they span slots, every shard for a broadcast. A client names the
        shard it sends to (``route``: a shard and whether it asks first, after
        an ``ASK``), or routes by the slots it knows moved (``known``); with
        neither, the call reaches the slot's shard now."""
        keys = command.keys
        if not keys:
            return self._broadcast if command.verb in BROADCAST else self.shards[0]
        slot = self.slot(keys[0])
        if route is not None:
            index, asking = route
        elif known is not None:
            index, asking = known.get(slot, self._shard_of_slot[slot]), False
        else:
            index, asking = self.owner(slot), False
        shard = self.shards[index]
        for key in keys[1:]:
            if self.slot(key) != slot:
                return _CrossSlot(self, shard)
        if not self.moved and self.migration is None:
            return shard
        return answer(self, index, command, slot, asking)

    def index_at(self, address: str) -> int:
        """The shard a redirect names."""
        return self.addresses.index(address)

    def migrate_slot(self, slot: int, target: int, duration_us: int) -> None:
        """Start moving ``slot`` to shard ``target`` (``slot_migration``)."""
        self.migrator.start(slot, target, duration_us)

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

    def holder(self, redis_key: str) -> Server:
        """The shard that holds ``redis_key`` now: its slot's, or, while the
        slot migrates, the new one once the key has moved."""
        slot = self.slot(redis_key)
        migration = self.migration
        if migration is not None and migration.slot == slot:
            target = self.shards[migration.target]
            if target.backend.expiry.deadline_us(redis_key) is not None or \
                    target.read_ledger_keys([redis_key])[redis_key] is not None:
                return target
        return self.shards[self.owner(slot)]

    def deadline_us(self, redis_key: str) -> int | None:
        return self.holder(redis_key).deadline_us(redis_key)

    def read_ledger_keys(self, redis_keys: list[str]) -> dict[str, Any]:
        """Each key read from the shard that holds it; in the order asked."""
        by_shard: dict[int, list[str]] = {}
        for key in redis_keys:
            by_shard.setdefault(self.holder(key).index, []).append(key)
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

    @property
    def redirects(self) -> int:
        return sum(shard.redirects for shard in self.shards)

    def load(self) -> list[int]:
        """Commands each shard executed (scripts and plain commands)."""
        return [shard.pipelined_commands for shard in self.shards]

def shard_address(index: int) -> str:
    """How redirects name shard ``index`` (``host:port``, as a node says it)."""
    return f"shard-{index}:6379"


class _CrossSlot:
    """The node a command with keys in several slots reaches: it answers
    ``CROSSSLOT`` and runs nothing."""

    def __init__(self, cluster: ClusterServer, shard: Server) -> None:
        self.cluster = cluster
        self.shard = shard
        self.index = shard.index
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
        self.index = 0

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
        return {"shards": 1, "busiest_shard_share": 1.0, "crossslot_refusals": 0,
                "cluster_redirects": 0, "keys_migrated": 0}
    load = server.load()
    return {"shards": len(load),
            "busiest_shard_share": round(max(load) / sum(load), 4) if sum(load) else 0.0,
            "crossslot_refusals": server.crossslot_refusals,
            "cluster_redirects": server.redirects,
            "keys_migrated": server.migrator.keys_migrated}
