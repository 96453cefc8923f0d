"""One hash slot moving from one shard to another, as ``redis-cli --cluster
reshard`` moves it, and what the cluster's nodes answer meanwhile.

Rules kept here (Redis 7.0's, checked against a real 7.0.15 cluster by
``tests/simulator/test_slot_migration_real.py``):

* The migration opens the slot on both nodes (the old one ``MIGRATING``, the
  new one ``IMPORTING``), hands the keys it found there over one at a time,
  evenly spaced over the migration's ``duration``, then whatever is left, and
  gives the slot to the new node on every primary (``SETSLOT NODE``). A key
  moves whole, with its TTL.
* Meanwhile the old node serves a command whose keys it all holds; when it
  holds none of them it answers ``ASK`` (try the new node, this once, with
  ``ASKING``); when it holds some, ``TRYAGAIN``. Inside a script it runs, a
  command on a key of the slot that is no longer there fails ("non local
  key"): the shim checks that on a simulated node.
* The new node serves a command sent with ``ASKING``, unless it has several
  keys and lacks some (``TRYAGAIN``); without ``ASKING`` it answers ``MOVED``
  to the old node, as every other node does until the slot has moved.
* Once moved, every node but the new one answers ``MOVED`` to it.

Which node a call reaches is the client's choice (``simulator.net.links``
keeps each replica's cluster client: the slots table it read when it started,
and what it learns from ``MOVED``). A real cluster's nodes decide for
themselves; the lab only opens, moves and closes the slot on them as here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.backends.slots import TRYAGAIN, ask, moved
from simulator.engine.trace import SERVER
from simulator.net.server import Command

ClusterServer = Any
"""``simulator.net.cluster.ClusterServer``, which imports this module."""


@dataclass
class SlotMigration:
    """A slot on its way from shard ``source`` to shard ``target``."""

    slot: int
    source: int
    target: int
    keys: list[str]
    """The slot's keys the old node held when the migration began, in the order they move."""
    moved: int = 0


def answer(cluster: ClusterServer, index: int, command: Command, slot: int,
           asking: bool) -> Any:
    """The node that answers ``command`` (its keys in ``slot``) when a client
    sends it to shard ``index`` (with ``ASKING`` first if ``asking``): that
    shard, perhaps serving the slot it imports for this call, or its redirect."""
    shard = cluster.shards[index]
    owner = cluster.owner(slot)
    migration = cluster.migration
    if migration is None or migration.slot != slot:
        if index == owner:
            return shard
        return _Redirect(shard, moved(slot, cluster.addresses[owner]))
    if cluster.native and shard.knows(command):
        # A real node decides; the call carries its ASKING to it. (A script
        # the node lacks is answered NOSCRIPT by the lab's model of its cache,
        # and a node redirects before it looks for the script: so the lab
        # decides those by the rules below.)
        return _Asking(shard, slot) if asking else shard
    if index == migration.source:
        held, missing = shard.present(command.keys)
        if not missing:
            return shard
        elsewhere = ask(slot, cluster.addresses[migration.target])
        return _Redirect(shard, TRYAGAIN if held else elsewhere)
    if index == migration.target and asking:
        held, missing = shard.present(command.keys)
        if missing and held + missing > 1:
            return _Redirect(shard, TRYAGAIN)
        return _Asking(shard, slot)
    return _Redirect(shard, moved(slot, cluster.addresses[owner]))


class _OnShard:
    """A shard's node as one call finds it."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.index = shard.index
        self.down = shard.down
        self.extra_latency_us = shard.extra_latency_us
        self.backend = shard.backend


class _Redirect(_OnShard):
    """A node answering a call with a redirect: nothing runs."""

    def __init__(self, shard: Any, message: str) -> None:
        super().__init__(shard)
        self.message = message

    def execute(self, command: Command, tag: int = -1) -> Any:
        return self.shard.redirected(self.message)


class _Asking(_OnShard):
    """A node serving, for one call sent with ``ASKING``, the slot it imports."""

    def __init__(self, shard: Any, slot: int) -> None:
        super().__init__(shard)
        self.slot = slot

    def execute(self, command: Command, tag: int = -1) -> Any:
        backend = self.backend
        backend.asking_slot = self.slot
        try:
            return self.shard.execute(command, tag)
        finally:
            backend.asking_slot = None


class Migrator:
    """Carries a slot migration out on a cluster, at virtual times."""

    def __init__(self, cluster: ClusterServer) -> None:
        self.cluster = cluster
        self.keys_migrated = 0

    def start(self, slot: int, target: int, duration_us: int) -> None:
        cluster = self.cluster
        source = cluster.owner(slot)
        if source == target:
            raise ValueError(f"slot {slot} is on shard {target} already")
        if cluster.migration is not None:
            raise ValueError("one slot migration at a time")
        old, new = cluster.shards[source], cluster.shards[target]
        old.flush()
        old.expire_due(cluster.kernel.now)
        keys = old.backend.keys_in_slot(slot)
        migration = SlotMigration(slot, source, target, keys)
        cluster.migration = migration
        new.backend.set_slot(slot, "IMPORTING", old.backend.node_id)
        old.backend.set_slot(slot, "MIGRATING", new.backend.node_id)
        if not cluster.native:
            old.backend.migrating_slot = slot
        cluster.trace.record(cluster.kernel.now, SERVER, 0, -1, "slot_migration_started",
                             amount=len(keys), detail=f"slot {slot}: shard {source} to {target}")
        step_us = duration_us // (len(keys) + 1)
        for position in range(len(keys)):
            cluster.kernel.after(step_us * (position + 1), self._move, migration, position)
        cluster.kernel.after(duration_us, self._finish, migration)

    def suspend(self, node: Any) -> None:
        """Before a restart replays ``node``'s writes: a migrating slot's keys
        must go back in without the node redirecting them (its old node's
        slot made stable for the while; its new node asked)."""
        migration = self.cluster.migration
        if migration is None:
            return
        if node.index == migration.source:
            node.backend.set_slot(migration.slot, "STABLE")
            node.backend.migrating_slot = -1
        elif node.index == migration.target:
            node.backend.asking_slot = migration.slot

    def resume(self, node: Any) -> None:
        """After the replay: the slot migrating again, as the node had it."""
        migration = self.cluster.migration
        if migration is None:
            return
        if node.index == migration.source:
            target = self.cluster.shards[migration.target]
            node.backend.set_slot(migration.slot, "MIGRATING", target.backend.node_id)
            if not self.cluster.native:
                node.backend.migrating_slot = migration.slot
        elif node.index == migration.target:
            node.backend.asking_slot = None

    def _move(self, migration: SlotMigration, position: int) -> None:
        self._hand_over(migration, migration.keys[position])

    def _hand_over(self, migration: SlotMigration, key: str) -> None:
        """Move one key from the old node to the new (if it is still there)."""
        cluster = self.cluster
        old, new = cluster.shards[migration.source], cluster.shards[migration.target]
        now = cluster.kernel.now
        for node in (old, new):
            node.flush()
            node.expire_due(now)
        payload = old.backend.move_key(key, new.backend)
        if payload is None:
            return
        deadline_us = new.backend.expiry.deadline_us(key)
        old.moved_out(key)
        new.moved_in(key, payload, deadline_us)
        migration.moved += 1
        self.keys_migrated += 1
        cluster.trace.record(now, SERVER, 0, -1, "key_migrated",
                             detail=key.removeprefix(old.backend.namespace))

    def _finish(self, migration: SlotMigration) -> None:
        """The keys left are handed over, and the slot is the new node's."""
        cluster = self.cluster
        old, new = cluster.shards[migration.source], cluster.shards[migration.target]
        old.flush()
        old.expire_due(cluster.kernel.now)
        for key in old.backend.keys_in_slot(migration.slot):
            self._hand_over(migration, key)
        slot = migration.slot
        for node in (old, new, *(shard for shard in cluster.shards if shard not in (old, new))):
            node.backend.set_slot(slot, "NODE", new.backend.node_id)
        old.backend.migrating_slot = -1
        old.backend.lost_slot = slot
        new.backend.gained_slot = slot
        cluster.moved[slot] = migration.target
        cluster.migration = None
        cluster.trace.record(cluster.kernel.now, SERVER, 0, -1, "slot_migrated",
                             amount=migration.moved,
                             detail=f"slot {slot}: shard {migration.source} to {migration.target}")
