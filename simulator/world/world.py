"""The simulated world of one run: the fleet, the server, and the faults.

Rules kept here:

* Replica ``index`` keeps its place on the network (``ReplicaNetwork``), its
  clock and its share of the traffic across incarnations; each incarnation
  gets a new kernel owner, new id and jitter streams and a fresh store.
* A crash drops the incarnation's processes (no cleanup runs), ends its
  requests in flight for the oracle, and, for stores that keep their state in
  the replica, loses that state.
* Every fault is traced as ``fault_<name>`` when it is applied and moves the
  ``FaultClock``; what it does to the store is the store's business.
* A store call that raises is a finding, not the end of the run
  (``simulator.world.findings``).
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from simulator.engine.kernel import Kernel, Owner, Process
from simulator.engine.runtime import ReplicaClock
from simulator.engine.streams import Streams
from simulator.engine.trace import SERVER, Trace
from simulator.net.links import FaultClock, LinkSettings, ReplicaNetwork
from simulator.net.server import Server
from simulator.plugin.family import Family
from simulator.plugin.protocol import Oracle, ReplicaObserver
from simulator.scenario.faults import (
    FAULT_KINDS,
    PlannedFault,
    ScheduledFault,
    ServerSettings,
    kept_until,
)
from simulator.scenario.reconfigure import Reconfiguration, reconfigured
from simulator.world.findings import StoreRaised, store_raised
from simulator.world.fleet import Replica, start_replica
from simulator.world.operations import (
    PreparedMigration,
    run_migration,
    run_reconfigure,
    run_rolling_restart,
)
from simulator.world.requests import RequestSource
from stores.registry import StoreKind

OPERATOR = "operator"
"""The name of the operator's migration process: its code is the store's."""


class World:
    """Everything one run simulates, wired together."""

    def __init__(self, *, kernel: Kernel, streams: Streams, trace: Trace,
                 oracle: Oracle, family: Family, kind: StoreKind, settings: Any,
                 server: Server | None, server_settings: ServerSettings, links: LinkSettings,
                 clocks: list[ReplicaClock], sources: list[RequestSource],
                 script_names: dict[str, str], until_us: int, boot_retry_us: int,
                 store_observer: ReplicaObserver | None = None) -> None:
        self.kernel = kernel
        self.streams = streams
        self.trace = trace
        self.oracle = oracle
        self.family = family
        self.store_observer = store_observer
        self.kind = kind
        self.settings = settings
        self.server = server
        self.server_settings = server_settings
        self.links = links
        self.clocks = clocks
        self.sources = sources
        self.script_names = script_names
        self.until_us = until_us
        self.boot_retry_us = boot_retry_us
        self.fault_clock = FaultClock()
        self.networks = [ReplicaNetwork() for _ in clocks]
        self.migration_network = ReplicaNetwork()
        """Where the operator's migration sits on the network (all its attempts)."""
        self.replica_settings: list[Any] = [settings] * len(clocks)
        """What each replica's next incarnation boots with: the fleet's
        settings, unless an operator's ``reconfigure`` changed its own."""
        self.replica_changes: list[dict[str, Any]] = [{} for _ in clocks]
        """Each replica's reconfigured settings (by field name) over the fleet's."""
        self.told_changes: list[dict[str, Any]] = [{} for _ in clocks]
        """The changes the oracle was last told each replica runs with."""
        self.current: list[Replica | None] = [None] * len(clocks)
        self.incarnations = [0] * len(clocks)
        self.held_down: set[int] = set()
        """Replicas an operator stopped: fault restarts leave them down."""
        self.counts: Counter = Counter()
        self.lab = kernel.new_owner("lab")
        self.replica_of: dict[Owner, int] = {}
        """Each replica incarnation's owner, to the replica's index."""
        self.first_raise: StoreRaised | None = None
        """The first store call that raised (``simulator.world.findings``)."""
        self.first_boot_traceback: str | None = None
        """The first boot refusal's traceback, for ``run --verbose``."""
        kernel.failures = self._store_raised
        self.as_embedded: Callable[[str], str] = str
        """A store's message, naming its keys, as on the embedded backend: no
        run-specific token enters the trace (``RedisBackend.as_embedded``)."""

    # -- the fleet -------------------------------------------------------------

    def start(self, faults: list[PlannedFault],
              migrations: list[PreparedMigration] = (),
              restarts: list[ScheduledFault] = (),
              reconfigurations: list[Reconfiguration] = ()) -> None:
        for index in range(len(self.clocks)):
            self._boot(index)
        for fault in faults:
            self.kernel.at(fault.at_us, self.apply, fault)
        for migration in migrations:
            self.kernel.at(migration.step.at, self._begin_migration, migration)
        for restart in restarts:
            self.kernel.at(restart.at, self._begin_rolling_restart, restart)
        for reconfiguration in reconfigurations:
            self.kernel.at(reconfiguration.entry.at, self._begin_reconfigure, reconfiguration)

    def _begin_migration(self, migration: PreparedMigration) -> None:
        self.kernel.spawn(run_migration(self, migration), self.lab, OPERATOR)

    def _begin_rolling_restart(self, restart: ScheduledFault) -> None:
        self.kernel.spawn(run_rolling_restart(self, restart), self.lab, OPERATOR)

    def _begin_reconfigure(self, reconfiguration: Reconfiguration) -> None:
        self.kernel.spawn(run_reconfigure(self, reconfiguration), self.lab, OPERATOR)

    def reconfigure(self, index: int, changes: dict[str, Any]) -> None:
        """Replica ``index``'s next incarnations boot with ``changes`` (by field
        name) to its settings: an operator's configuration change reaching it."""
        self.replica_settings[index] = reconfigured(self.replica_settings[index], changes)
        self.replica_changes[index] = {**self.replica_changes[index], **changes}

    def hold_down(self, indices: list[int]) -> None:
        """Replicas an operator stopped: fault restarts leave them down."""
        self.held_down.update(indices)

    def let_up(self, indices: list[int]) -> None:
        self.held_down.difference_update(indices)

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] += amount

    def switch_kind(self, kind: StoreKind, settings: Any) -> None:
        """Replicas booted from now on run ``kind`` with ``settings`` (a
        reconfiguration before it is the old fleet's: the migration's settings
        are the new fleet's)."""
        self.kind, self.settings = kind, settings
        self.replica_settings = [settings] * len(self.clocks)
        self.replica_changes = [{} for _ in self.clocks]

    def retire(self, index: int) -> None:
        """Take replica ``index`` down (an operator's stop, or a crash)."""
        replica = self.current[index]
        if replica is None:
            return
        self.kernel.crash(replica.owner)
        now = self.kernel.now
        for number in sorted(replica.in_flight):
            self.oracle.aborted(number, now)
        if replica.kind.per_replica or replica.kind.service is not None:
            # What the replica kept in its memory dies with it: a store kept
            # in the replica, or a service client's own state (a holder's
            # leases and unbilled usage).
            self.oracle.source_lost(replica.source, now)
        self.current[index] = None

    def restart_replica(self, index: int) -> None:
        """Start a new incarnation of replica ``index``, on the fleet's kind."""
        if self.current[index] is not None or index in self.held_down:
            return
        self.incarnations[index] += 1
        self.trace.record(self.kernel.now, index, self.incarnations[index], -1,
                          "replica_restarted")
        self._boot(index)

    def _boot(self, index: int) -> None:
        incarnation = self.incarnations[index]
        replica = start_replica(
            index, incarnation, kernel=self.kernel, streams=self.streams, trace=self.trace,
            oracle=self.oracle, family=self.family, kind=self.kind, server=self.server,
            link_settings=self.links, clock=self.clocks[index], script_names=self.script_names,
            network=self.networks[index], faults=self.fault_clock,
            store_observer=self.store_observer)
        replica.boot_refused = self._boot_refused
        replica.as_embedded = self.as_embedded
        self.current[index] = replica
        self.replica_of[replica.owner] = index
        settings = self.replica_settings[index]
        changes = self.replica_changes[index]
        if changes != self.told_changes[index]:
            self._configured(index, incarnation, changes)
        self.kernel.spawn(replica.main(settings, self.sources[index], self.until_us,
                                       self.boot_retry_us),
                          replica.owner, "replica main")

    def _configured(self, index: int, incarnation: int, changes: dict[str, Any]) -> None:
        """Replica ``index`` boots with other settings than its last
        incarnation: the trace says which, and the oracle judges its requests
        by them (``settings_in_force``)."""
        self.told_changes[index] = dict(changes)
        words = ",".join(f"{name}={value}" for name, value in sorted(changes.items()))
        self.trace.record(self.kernel.now, index, incarnation, -1, "replica_reconfigured",
                          detail=words or "as the fleet")
        self.oracle.settings_in_force(index, dict(changes), self.kernel.now)

    def _boot_refused(self, refusal: BaseException) -> None:
        if self.first_boot_traceback is None:
            self.first_boot_traceback = "".join(traceback.format_exception(refusal))

    def _store_raised(self, process: Process, error: BaseException) -> bool:
        """A replica's process (a request served, a store's own task) or the
        operator's migration raised: recorded as a finding, and the run goes
        on. Any other process of the lab's failing is the lab's bug: False."""
        index = self.replica_of.get(process.owner)
        if index is None and process.name != OPERATOR:
            return False
        replica = SERVER if index is None else index
        incarnation = 0 if index is None else self.incarnations[index]
        self.trace.record(self.kernel.now, replica, incarnation, process.tag, "store_raised",
                          outcome=type(error).__name__,
                          detail=self.as_embedded(str(error))[:200])
        if self.first_raise is None:
            self.first_raise = store_raised(process, error, replica, self.kernel.now)
        return True

    def live_replicas(self) -> list[Replica]:
        """Every replica incarnation running now."""
        return [replica for replica in self.current if replica is not None]

    # -- faults ------------------------------------------------------------------

    def apply(self, fault: PlannedFault) -> None:
        now = self.kernel.now
        self.fault_clock.mark(now)
        # A server fault on a cluster names its shard (none: every shard).
        detail = fault.call or (f"shard {fault.shard}" if fault.shard is not None else "")
        if fault.slot is not None:
            detail = f"slot {fault.slot} to shard {fault.shard}"
        for replica in fault.replicas or (SERVER,):
            self.trace.record(now, replica, -1, -1, f"fault_{fault.fault}",
                              amount=fault.duration_us, outcome=fault.direction
                              if fault.fault == "partition" else "", detail=detail)
        armed = FAULT_KINDS[fault.fault].armed
        if armed is not None:
            self._arm(armed, fault)
        else:
            getattr(self, f"_{fault.fault}")(fault)

    def _crash(self, fault: PlannedFault) -> None:
        for index in fault.replicas:
            if self.current[index] is None:
                continue
            self.retire(index)
            if fault.restart_after_us is not None:
                self.kernel.after(fault.restart_after_us, self.restart_replica, index)

    def _pause(self, fault: PlannedFault) -> None:
        for index in fault.replicas:
            replica = self.current[index]
            if replica is not None:
                self.kernel.pause(replica.owner, fault.duration_us)

    def _partition(self, fault: PlannedFault) -> None:
        until = self.kernel.now + fault.duration_us
        for index in fault.replicas:
            network = self.networks[index]
            if fault.direction in ("both", "to-server"):
                network.cut_requests_until = max(network.cut_requests_until, until)
            if fault.direction in ("both", "from-server"):
                network.cut_replies_until = max(network.cut_replies_until, until)

    def _arm(self, kind: str, fault: PlannedFault) -> None:
        """Arm ``kind`` for the next ``count`` matching calls of the replicas hit."""
        for network in self._hit(fault):
            network.forced.append([kind, fault.call, fault.count, fault.extra_us])

    def _hit(self, fault: PlannedFault) -> list[ReplicaNetwork]:
        if fault.migration:
            return [self.migration_network]
        return [self.networks[index] for index in fault.replicas]

    def _server_restart(self, fault: PlannedFault) -> None:
        self._server_down(kept_until(self.server_settings, self.kernel.now),
                          self.server_settings.persistence, fault)

    def _failover(self, fault: PlannedFault) -> None:
        self._server_down(self.kernel.now - fault.lag_us, "failover", fault)

    def _server_down(self, keep_until_us: int | None, how: str, fault: PlannedFault) -> None:
        if self.server is None:
            return  # in-process stores have no server to lose
        for node in self.server.nodes(fault.shard):
            node.down = True
            node.restart(keep_until_us, how)
            self.kernel.after(fault.duration_us, self._server_up, node)

    def _server_up(self, node: Any) -> None:
        node.down = False
        self.trace.record(self.kernel.now, SERVER, 0, -1, "server_up")

    def _slot_migration(self, fault: PlannedFault) -> None:
        assert fault.slot is not None and fault.shard is not None
        self.server.migrate_slot(fault.slot, fault.shard, fault.duration_us)

    def _latency_spike(self, fault: PlannedFault) -> None:
        if self.server is None:
            return
        for node in self.server.nodes(fault.shard):
            node.extra_latency_us = max(node.extra_latency_us, fault.extra_us)
            node.spike_ends.append(self.kernel.now + fault.duration_us)
            self.kernel.after(fault.duration_us, self._spike_over, node)

    def _spike_over(self, node: Any) -> None:
        node.spike_ends = [end for end in node.spike_ends if end > self.kernel.now]
        if not node.spike_ends:
            node.extra_latency_us = 0
