"""An operator's migration, run inside the simulation.

What an operator does to move a fleet from one store kind to another: stop
the replicas gracefully (they take no new request, finish the ones in
flight and what those left running, such as a release retried in the
background), run the target kind's migration from a separate process of its own,
run it again if it died, then start the fleet on the target kind. Every
command the migration sends is a real message on the simulated network,
tagged ``MIGRATION`` so the oracle reads the moves it makes as moves, not as
spend gained or lost.

Rules kept here:

* A migration killed at an exact point (``crash_after_commands``) is killed
  right after that command executed, before its reply: the worst moment.
* A migration that fails on its own (a lost reply, a refusal) is also run
  again, after ``rerun_after``; the store's migration must make that safe.
* Replicas the operator ``keep_running`` stay on the old kind: stray writers.
* Strays may hang (``strays_hung_for``) from the migration's start: the
  operator missed them because they did not answer.
* ``again_after`` the fleet restarted, the operator runs the migration once
  more beside the serving fleet (the recovery a boot fence prescribes for a
  stray writer found later): the strays' spend is carried while the new
  fleet settles, so the migration must be safe to run live.

A rolling restart (``run_rolling_restart``) stops and starts replicas one
at a time, gracefully, as a deployment or a configuration reload does; a
configuration change (``run_reconfigure``) is one whose replicas each boot
again with the new settings, so while it rolls out old and new serve side
by side (and a replica left out keeps the old ones for good).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from simulator.engine.trace import SERVER
from simulator.engine.traps import Sleep
from simulator.net.links import Link
from simulator.net.redis_port import SimRedis
from simulator.plugin.protocol import MIGRATION
from simulator.scenario.faults import ScheduledFault
from simulator.scenario.model import MigrationStep
from simulator.scenario.reconfigure import Reconfiguration
from stores.registry import StoreKind

if TYPE_CHECKING:
    from simulator.engine.kernel import Kernel
    from simulator.engine.streams import Streams
    from simulator.engine.trace import Trace
    from simulator.net.links import FaultClock, LinkSettings, ReplicaNetwork
    from simulator.net.server import Server
    from simulator.plugin.family import Family
    from simulator.world.fleet import Replica

MIGRATOR = -2
"""The ``replica`` of the migration's events in the trace."""
POLL_US = 10_000
DRAIN_TIMEOUT_US = 60_000_000


class Operated(Protocol):
    """What a migration is given of the world it runs in (``World`` is one):
    it reads the fleet and the network, and changes the world only through
    these methods."""

    kernel: Kernel
    trace: Trace
    server: Server | None
    streams: Streams
    links: LinkSettings
    migration_network: ReplicaNetwork
    fault_clock: FaultClock
    script_names: dict[str, str]
    current: list[Replica | None]
    family: Family

    def hold_down(self, indices: list[int]) -> None:
        """Keep these replicas down: a fault's restart leaves them so."""

    def let_up(self, indices: list[int]) -> None:
        """Undo ``hold_down``."""

    def count(self, name: str, amount: int = 1) -> None:
        """Add to one of the run's operation counts (in the summary)."""

    def switch_kind(self, kind: StoreKind, settings: Any) -> None: ...

    def retire(self, index: int) -> None: ...

    def restart_replica(self, index: int) -> None: ...

    def reconfigure(self, index: int, changes: Any) -> None:
        """Replica ``index``'s next incarnations boot with ``changes`` to its settings."""


@dataclass(frozen=True)
class PreparedMigration:
    """A migration step with its target kind and settings resolved."""

    index: int
    step: MigrationStep
    kind: StoreKind
    settings: Any
    namespaces: tuple[str, ...]


@dataclass
class Attempt:
    finished: bool = False
    failed: bool = False
    totals: dict[str, int] = field(default_factory=dict)
    """The family's ``migration_totals`` read off the finished migration's report."""


async def run_migration(world: Operated, migration: PreparedMigration) -> None:
    """The operator's whole procedure for one migration step."""
    kernel, step = world.kernel, migration.step
    world.trace.record(kernel.now, SERVER, 0, -1, "migration_started", detail=step.to)
    stopped = [index for index, replica in enumerate(world.current) if replica is not None
               and step.stop_fleet and index not in step.keep_running]
    world.hold_down(stopped)
    if step.strays_hung_for is not None:
        # Strays the operator missed because they hung: what they hold in
        # flight lands on the old layout after the migration carried it.
        for index in step.keep_running:
            replica = world.current[index] if index < len(world.current) else None
            if replica is not None:
                kernel.pause(replica.owner, step.strays_hung_for)
    await _stop_gracefully(world, stopped)
    attempts = await _migrate_until_done(world, migration, 0)
    world.switch_kind(migration.kind, migration.settings)
    await Sleep(step.restart_after)
    world.let_up(stopped)
    for index in stopped:
        if world.current[index] is None:
            world.restart_replica(index)
    if step.again_after is not None:
        await Sleep(step.again_after)
        world.trace.record(kernel.now, SERVER, 0, -1, "migration_started", detail=step.to)
        await _migrate_until_done(world, migration, attempts)


async def _migrate_until_done(world: Operated, migration: PreparedMigration,
                              first_attempt: int) -> int:
    """Run the migration, and again ``rerun_after`` each failure, until one
    attempt finishes; the attempts are numbered from ``first_attempt``.
    Returns the next attempt's number."""
    attempt_number = first_attempt
    while True:
        attempt = _start_attempt(world, migration, attempt_number)
        while not (attempt.finished or attempt.failed):
            await Sleep(POLL_US)
        if attempt.finished:
            for name, value in attempt.totals.items():
                world.count(name, value)
            break
        world.count("migration_reruns")
        attempt_number += 1
        await Sleep(migration.step.rerun_after)
    world.count("migrations_completed")
    return attempt_number + 1


async def run_rolling_restart(world: Operated, restart: ScheduledFault,
                              reconfiguration: Reconfiguration | None = None) -> None:
    """The operator restarts replicas gracefully one at a time (all of them,
    or those ``restart`` names): each stops taking requests, finishes those in
    flight, exits and starts again ``down_for`` later; the next begins
    ``every`` after the one before it began. A replica already down (crashed,
    or stopped by a migration) is passed over. With a ``reconfiguration``,
    each replica in its turn gets the new settings first: the incarnation it
    starts (and any later one) runs them."""
    kernel = world.kernel
    indices = list(restart.replicas) or (
        [restart.replica] if restart.replica is not None else range(len(world.current)))
    if reconfiguration is None:
        world.trace.record(kernel.now, SERVER, 0, -1, "rolling_restart_started",
                           amount=len(indices))
    else:
        world.trace.record(kernel.now, SERVER, 0, -1, "reconfigure_started",
                           amount=len(indices), detail=reconfiguration.words())
    for index in indices:
        began = kernel.now
        if reconfiguration is not None:
            world.reconfigure(index, reconfiguration.changes)
        if world.current[index] is not None:
            world.hold_down([index])
            await _stop_gracefully(world, [index])
            await Sleep(restart.down_for)
            world.let_up([index])
            world.restart_replica(index)
        rest = restart.every - (kernel.now - began)
        if rest > 0:
            await Sleep(rest)


async def run_reconfigure(world: Operated, reconfiguration: Reconfiguration) -> None:
    """The operator changes the store's settings and rolls the change out as
    a rolling restart (``run_rolling_restart``) with the new settings."""
    await run_rolling_restart(world, reconfiguration.entry, reconfiguration)


async def _stop_gracefully(world: Operated, indices: list[int]) -> None:
    replicas = [world.current[index] for index in indices]
    for replica in replicas:
        replica.stopping = True
    deadline = world.kernel.now + DRAIN_TIMEOUT_US
    while any(_busy(replica) for replica in replicas) and world.kernel.now < deadline:
        await Sleep(POLL_US)
    for index in indices:
        world.retire(index)


def _busy(replica: Replica) -> bool:
    """Whether a replica told to stop still works for a request: one in
    flight, or what a request's call spawned and left running (a release
    retried in the background after its request was over). A graceful stop
    waits for both; the store's own loops (tagged by no request) it does not."""
    return bool(replica.in_flight) or any(process.tag >= 0
                                          for process in replica.owner.processes)


def _start_attempt(world: Operated, migration: PreparedMigration, number: int) -> Attempt:
    kernel = world.kernel
    owner = kernel.new_owner(f"migration-{migration.index}.{number}")
    link = Link(kernel, world.server, world.trace, owner, MIGRATOR, number,
                world.streams.get("migration", migration.index, number), world.links,
                world.migration_network, world.fault_clock)
    attempt = Attempt()
    limit = migration.step.crash_after_commands
    if limit is not None and number == 0:
        def kill_at_limit() -> None:
            if link.executed == limit and owner.alive:
                kernel.crash(owner)
                attempt.failed = True
                world.trace.record(kernel.now, MIGRATOR, number, MIGRATION,
                                   "fault_migration_killed", amount=limit)
                world.fault_clock.hit(MIGRATION, "migration_killed", "migrate")
        link.after_execute = kill_at_limit
    port = SimRedis(link, world.script_names)

    async def migrate() -> None:
        try:
            report = await migration.kind.migrate(port, migration.settings,
                                                  list(migration.namespaces))
        except Exception as failure:  # noqa: BLE001 - the operator reads it and re-runs
            attempt.failed = True
            world.trace.record(kernel.now, MIGRATOR, number, MIGRATION, "migration_failed",
                               outcome=type(failure).__name__,
                               detail=world.as_embedded(str(failure))[:200])
            return
        attempt.totals = {name: getattr(report, attribute)
                          for name, attribute in world.family.migration_totals}
        attempt.finished = True
        # The trace's amount is the family's first migration total (what the
        # budget's migration carried), as replays of older traces expect.
        world.trace.record(kernel.now, MIGRATOR, number, MIGRATION, "migration_finished",
                           amount=next(iter(attempt.totals.values()), 0))

    kernel.spawn(migrate(), owner, "migration", tag=MIGRATION)
    return attempt
