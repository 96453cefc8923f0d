"""Faults: from rates in the scenario, or from an explicit timed schedule.

Every fault becomes a timed event before the run starts (rates are drawn from
their own seeded streams, one per source), so the same scenario and seed give
the same faults, and a race report can list them one by one. Each injected
fault is an event in the trace (``fault_*``). What a fault does to the store
is left to the store: the lab only breaks things and records.

=====================  ==================================================
crash                  a replica dies (no cleanup); ``restart_after``
                       brings up a new incarnation (new ids, empty memory)
pause                  a replica stops the world for ``duration``
partition              replicas cut from the server for ``duration``;
                       ``direction``: both, to-server, from-server
server_restart         the server goes down for ``down_for`` and comes back
                       with what its persistence model saved
failover               a replica lagging by ``lag`` is promoted after
                       ``down_for``: the writes of that window are lost
latency_spike          replies take ``extra`` longer for ``duration``
lose_request           the next ``count`` matching calls of a replica are
lose_reply             lost on the way to / from the server (schedule only)
connection_stall       the connection of a replica's next matching call
                       executes it and never answers again
connection_reset       that connection resets once the call has executed
slow_reply             that call's reply takes ``extra`` longer
dropped_waiter         that call's waiter is dropped from its connection's
                       queue: on a multiplexed connection the replies behind
                       it reach the wrong callers (``simulator.net.connections``)
slot_migration         on a cluster, one hash slot (``slot``, or ``key``'s)
                       moves to shard ``shard`` over ``duration``, its keys
                       handed over one by one, as ``redis-cli --cluster
                       reshard`` moves it: nodes answer ASK, TRYAGAIN and
                       MOVED meanwhile (``simulator.net.slot_migration``)
migrate                (an operator's action) run the ``[[migrations]]`` entry
                       ``step`` at ``at``, with this entry's ``restart_after``,
                       ``keep_running``, ``crash_after_commands``, ``stop_fleet``,
                       ``again_after`` (a re-run beside the serving fleet)
rolling_restart        (an operator's action) restart the replicas gracefully
                       one after another, ``every`` apart, each down for
                       ``down_for`` (``replicas``: which; default all)
reconfigure            (an operator's action) change some of the store's
                       ``settings`` (a cap, a TTL: those its family declares
                       reloadable) and roll them out as a rolling restart
                       does: each replica restarted with the new settings in
                       turn, so old and new serve side by side meanwhile
                       (``replicas``: which get them; default all)
=====================  ==================================================

The four connection faults also come from per-replica rates, each hitting
the replica's next call (optionally only calls labelled ``call``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from simulator.backends.slots import HASH_SLOTS, RUN_PREFIX, slot_of
from simulator.scenario.base import MAX_REPLICAS, Model, ReplicaIndex
from simulator.scenario.distributions import DurationDistribution
from stores.domains import Flag, Integer
from stores.quantities import DurationUs, RatePerSecond


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault the lab injects: everything the layers need to know of it.

    Faults (here), the world that applies them (``simulator.world.world``),
    the links that carry armed ones (``simulator.net.links``), hunt's
    strategies, the work estimate and the counterfactual mode all read this
    table; adding a kind is one entry here plus its applier in ``World``
    (none for an ``armed`` kind: every replica's link honours what is armed).
    """

    name: str
    targets_replicas: bool
    """It hits named replicas: a scheduled one needs ``replica`` (or ``replicas``)."""
    drawn_per_replica: bool = False
    """From a rate, it is drawn for every replica (else once for the fleet)."""
    armed: str | None = None
    """What it arms on the replica's next matching call(s), as
    ``ReplicaNetwork.forced`` keeps it; None: it is applied when it falls due."""
    needs_duration: bool = False
    """A scheduled one needs ``duration``."""
    connection: bool = False
    """A connection fault: it hits the connection of the replica's next matching call."""
    hunted: bool = False
    """``hunt`` draws it unless told otherwise (``--faults`` names any hunted or
    connection kind)."""
    rated: bool = True
    """``[faults]`` has a rate table for it (else it comes only from a schedule)."""
    counterfactual_class: bool = False
    """Its rate table is a class of its own the counterfactual mode removes."""
    persistence_decides: bool = False
    """What it loses is what the server's persistence model does not keep."""
    hits_server: bool = False
    """It hits the server: on a cluster one shard (``shard``), or every one."""
    operator: bool = False
    """An operator's action, not a fault: the run's operations carry it out
    (``Scenario.operations``), and the fault planner leaves it alone."""


FAULT_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("crash", targets_replicas=True, drawn_per_replica=True, hunted=True,
              counterfactual_class=True),
    FaultKind("pause", targets_replicas=True, drawn_per_replica=True, needs_duration=True,
              hunted=True, counterfactual_class=True),
    FaultKind("partition", targets_replicas=True, needs_duration=True,
              counterfactual_class=True),
    FaultKind("server_restart", targets_replicas=False, counterfactual_class=True,
              persistence_decides=True, hits_server=True),
    FaultKind("failover", targets_replicas=False, counterfactual_class=True,
              hits_server=True),
    FaultKind("latency_spike", targets_replicas=False, needs_duration=True,
              counterfactual_class=True, hits_server=True),
    FaultKind("lose_request", targets_replicas=True, armed="request", hunted=True, rated=False),
    FaultKind("lose_reply", targets_replicas=True, armed="reply", hunted=True, rated=False),
    *(FaultKind(name, targets_replicas=True, drawn_per_replica=True, armed=armed,
                connection=True)
      for name, armed in (("connection_stall", "stall"), ("connection_reset", "reset"),
                          ("slow_reply", "slow"), ("dropped_waiter", "drop_waiter"))),
    FaultKind("slot_migration", targets_replicas=False, needs_duration=True, rated=False),
    FaultKind("migrate", targets_replicas=False, rated=False, operator=True),
    FaultKind("rolling_restart", targets_replicas=False, rated=False, operator=True),
    FaultKind("reconfigure", targets_replicas=False, rated=False, operator=True),
)}
"""Every fault kind, by name, in the order the docs list them."""

SHARD_FAULTS = tuple(name for name, kind in FAULT_KINDS.items() if kind.hits_server)
"""The faults that hit a server, so one shard of a cluster (``ScheduledFault.shard``)."""

HUNTED_FAULTS = ("lose_reply", "lose_request", "crash", "pause")
"""What ``hunt`` draws unless told otherwise: the ``hunted`` kinds, in the order
hunts have always drawn them (the order a seed's schedules depend on)."""

FaultName = Literal[tuple(FAULT_KINDS)]  # type: ignore[valid-type]
CONNECTION_FAULT_NAMES = tuple(name for name, kind in FAULT_KINDS.items() if kind.connection)
Direction = Literal["both", "to-server", "from-server"]

MAX_STEPS = 1_000
"""The highest ``[[migrations]]`` index a ``migrate`` entry may name."""
MAX_STEP_COMMANDS = 1_000_000_000
"""The most commands a ``migrate`` entry lets its migration run before it is killed."""
MAX_CALLS_HIT = 1_000_000
"""The most calls one scheduled fault hits (``count``)."""
MAX_KEYS = 1_000_000_000
"""The largest ``maxmemory_keys``."""
MAX_SHARDS = 64
"""Most primaries a simulated cluster has (a real one: 1,000; 64 is far past
where a run's per-shard figures stop saying anything new)."""


class CrashRate(Model):
    rate: RatePerSecond = Field(description="Crashes per replica, e.g. '1/h'.")
    restart_after: DurationDistribution | None = Field(
        "30s", description="Downtime before a new incarnation starts; none: stays down.")


class PauseRate(Model):
    rate: RatePerSecond = Field(description="Stop-the-world pauses per replica.")
    duration: DurationDistribution = Field("2s", description="How long a pause lasts.")


class PartitionRate(Model):
    rate: RatePerSecond = Field(description="Partitions, fleet-wide.")
    duration: DurationDistribution = Field("10s", description="How long one lasts.")
    replicas: Integer = Field(1, ge=1, le=MAX_REPLICAS,
                              description="How many replicas each one cuts off (more "
                              "than the fleet: all of it).")
    direction: Direction = Field("both", description="both, to-server or from-server.")


class ServerFaultRate(Model):
    """A rate of faults that hit the server: on a cluster, each drawn on a shard."""

    shards: list[Annotated[Integer, Field(ge=0, le=MAX_SHARDS - 1)]] | None = Field(
        None, max_length=MAX_SHARDS, description="On a cluster: only the faults drawn on "
        "these shards happen (the draws are the same whichever are listed, so the others "
        "fall as before); none: every shard's.")


class ServerRestartRate(ServerFaultRate):
    rate: RatePerSecond = Field(description="Server restarts.")
    down_for: DurationDistribution = Field("2s", description="Downtime of each.")


class FailoverRate(ServerFaultRate):
    rate: RatePerSecond = Field(description="Failovers to a lagging replica.")
    lag: DurationUs = Field("1s", description="How far behind the promoted replica is.")
    down_for: DurationDistribution = Field("1s", description="Time to promote it.")


class LatencySpikeRate(ServerFaultRate):
    rate: RatePerSecond = Field(description="Latency spikes on the server.")
    duration: DurationDistribution = Field("5s", description="How long one lasts.")
    extra: DurationDistribution = Field("50ms", description="Extra reply latency meanwhile.")


class ConnectionFaultRate(Model):
    rate: RatePerSecond = Field(description="Faults per replica, e.g. '1/min'.")
    call: str | None = Field(None, description="Only calls with this label (a script name "
                             "such as 'acquire', or a verb such as 'PING'); none: any call.")


class SlowReplyRate(ConnectionFaultRate):
    extra: DurationDistribution = Field("300ms", description="How much later the reply comes.")


class ScheduledFault(Model):
    """One fault at an exact virtual time (race reports, property tests)."""

    at: DurationUs = Field(description="When, in virtual time.")
    fault: FaultName = Field(description="crash, pause, partition, server_restart, failover, "
                             "latency_spike, lose_request, lose_reply, connection_stall, "
                             "connection_reset, slow_reply or dropped_waiter; or an "
                             "operator's migrate, rolling_restart or reconfigure.")
    replica: ReplicaIndex | None = Field(None, description="The replica it hits (from 0, below "
                                         "fleet.replicas).")
    replicas: list[ReplicaIndex] = Field(default_factory=list, description="Several replicas "
                                         "at once (instead of `replica`).")
    duration: DurationUs | None = Field(None, description="pause, partition, spike.")
    restart_after: DurationUs | None = Field(None, description="crash: restart delay.")
    direction: Direction = Field("both", description="partition direction.")
    lag: DurationUs = Field("0s", description="failover: replication lag.")
    down_for: DurationUs = Field("0s", description="server_restart/failover downtime; "
                                 "rolling_restart, reconfigure: each replica's.")
    extra: DurationUs = Field("50ms", description="latency_spike, slow_reply: added latency.")
    shard: Integer | None = Field(None, ge=0, le=MAX_SHARDS - 1, description="server_restart, "
                                  "failover, latency_spike on a cluster: the shard it hits "
                                  "(from 0); none: every shard at once. slot_migration: the "
                                  "shard the slot moves to.")
    slot: Integer | None = Field(None, ge=0, le=HASH_SLOTS - 1, description="slot_migration: "
                                 "the hash slot that moves.")
    key: str | None = Field(None, max_length=1_000, description="slot_migration: instead of "
                            "`slot`, the slot of this key as the store names it (its hash "
                            "tag's, e.g. '{tenant-1}').")
    call: str | None = Field(None, description="lose_* and connection faults: only calls "
                             "with this label (a script name such as 'settle_v1', or a verb).")
    count: Integer = Field(1, ge=1, le=MAX_CALLS_HIT,
                           description="lose_* and connection faults: how many calls.")
    migration: Flag = Field(False, description="lose_*: hit the operator's migration process "
                            "instead of a replica.")
    step: Integer | None = Field(None, ge=0, le=MAX_STEPS, description="migrate: the "
                                 "[[migrations]] entry it runs (from 0).")
    keep_running: list[ReplicaIndex] | None = Field(
        None, description="migrate: replicas the operator forgets to stop (stray writers).")
    crash_after_commands: Integer | None = Field(
        None, ge=1, le=MAX_STEP_COMMANDS, description="migrate: kill the migration after this "
        "many of its commands ran.")
    stop_fleet: Flag | None = Field(None, description="migrate: stop the fleet first.")
    again_after: DurationUs | None = Field(
        None, description="migrate: run it once more this long after the fleet restarted, "
        "beside the serving fleet (the recovery from a stray writer).")
    strays_hung_for: DurationUs | None = Field(
        None, description="migrate: the replicas kept running hang this long from its start "
        "(the operator missed them because they did not answer).")
    every: DurationUs = Field("1s", description="rolling_restart, reconfigure: from one "
                              "replica's restart to the next's.")
    settings: dict[str, Any] | None = Field(
        None, description="reconfigure: the store settings the operator changes and their new "
        "values, by their names in store_settings; only those the store kind "
        "declares reloadable (a cap, a TTL).")

    @property
    def moving_slot(self) -> int | None:
        """A slot migration's slot: ``slot``, or ``key``'s under the run's
        ``lab:`` prefix (the hash tag's, for a tagged key)."""
        if self.key is not None:
            return slot_of(RUN_PREFIX + self.key)
        return self.slot

    @model_validator(mode="after")
    def _has_its_target(self) -> ScheduledFault:
        if self.fault == "migrate" and self.step is None:
            raise ValueError("a scheduled migrate needs `step`: the [[migrations]] entry it runs")
        if self.fault == "slot_migration" and (self.shard is None
                                                or (self.slot is None) == (self.key is None)):
            raise ValueError("a scheduled slot_migration needs `shard` (where the slot moves) "
                             "and one of `slot` or `key` (which slot)")
        if self.fault == "reconfigure" and not self.settings:
            raise ValueError("a scheduled reconfigure needs `settings`: the store settings it "
                             "changes and their new values, by their names in store_settings")
        if FAULT_KINDS[self.fault].operator:
            return self
        if self.migration:
            if FAULT_KINDS[self.fault].armed not in ("request", "reply"):
                raise ValueError("only lose_request and lose_reply can hit the migration")
            return self
        kind = FAULT_KINDS[self.fault]
        if kind.targets_replicas and self.replica is None and not self.replicas:
            raise ValueError(f"a scheduled {self.fault} needs `replica` (or `replicas`)")
        if kind.needs_duration and self.duration is None:
            raise ValueError(f"a scheduled {self.fault} needs `duration`")
        return self


class Faults(Model):
    """Faults drawn from rates, and faults at exact times."""

    crash: CrashRate | None = Field(None, description="Replica crashes.")
    pause: PauseRate | None = Field(None, description="Replica stop-the-world pauses.")
    partition: PartitionRate | None = Field(None, description="Network partitions.")
    server_restart: ServerRestartRate | None = Field(None, description="Server restarts.")
    failover: FailoverRate | None = Field(None, description="Failovers.")
    latency_spike: LatencySpikeRate | None = Field(None, description="Latency spikes.")
    connection_stall: ConnectionFaultRate | None = Field(
        None, description="Connections that stop answering (per replica).")
    connection_reset: ConnectionFaultRate | None = Field(
        None, description="Connection resets (per replica).")
    slow_reply: SlowReplyRate | None = Field(
        None, description="Replies slower by `extra` (per replica).")
    dropped_waiter: ConnectionFaultRate | None = Field(
        None, description="Waiters dropped from a connection's queue (per replica).")
    until: DurationUs | None = Field(
        None, description="Rate-drawn faults stop here (default: the end of the arrival "
        "window), so the drain shows how the store recovers.")
    schedule: list[ScheduledFault] = Field(default_factory=list,
                                           description="Faults at exact times.")


class ClusterSettings(Model):
    """A Redis Cluster: keys spread over primaries by hash slot."""

    shards: Integer = Field(ge=1, le=MAX_SHARDS, description="Primaries (shards), the "
                            "16,384 hash slots split among them as redis-cli --cluster "
                            "create splits them.")
    replicas_per_shard: Integer = Field(
        1, ge=0, le=5, description="Replicas of each primary: a failover promotes one, "
        "lacking the fault's last `lag` of writes; with 0, a shard has nothing to fail over "
        "to (a failover is refused).")
    follows_redirects: Flag = Field(
        True, description="The replicas' cluster client follows a node's MOVED and ASK "
        "(and sends again on TRYAGAIN), as redis-py's RedisCluster does, up to 16 times a "
        "call; false: a redirect reaches the store as an error.")


class ServerSettings(Model):
    """The Redis server's persistence and memory limits, and whether it is a cluster."""

    persistence: Literal["none", "rdb", "aof-everysec", "aof-always"] = Field(
        "aof-everysec", description="What a restart keeps: nothing, the last RDB snapshot, "
        "all but the last 1-2 s, or everything.")
    rdb_every: DurationUs = Field("60s", description="Snapshot interval for 'rdb'.")
    maxmemory_keys: Integer = Field(
        0, ge=0, le=MAX_KEYS,
        description="Most keys kept before eviction; 0: no limit (maxmemory counted in keys, "
        "not bytes).")
    eviction_policy: Literal["allkeys-lru", "allkeys-random", "volatile-lru", "volatile-ttl",
                             "volatile-random"] = Field("allkeys-lru",
                                                        description="Which keys go first.")
    cluster: ClusterSettings | None = Field(
        None, description="Run on a Redis Cluster of this shape: simulated (each shard a "
        "server node of its own on an embedded fakeredis, with its own persistence, "
        "restarts, failovers and latency, keys routed by hash slot), or a throwaway real one "
        "with --backend redis-cluster or valkey-cluster (3 shards or more); none: one server.")


def kept_until(settings: ServerSettings, crash_us: int) -> int | None:
    """The last virtual instant whose writes survive a restart at ``crash_us``."""
    if settings.persistence == "aof-always":
        return crash_us
    if settings.persistence == "aof-everysec":
        # fsync each second; a write made while one is in progress waits for
        # the next, so up to about two seconds are lost.
        return max(-1, (crash_us // 1_000_000 - 1) * 1_000_000)
    if settings.persistence == "rdb":
        every = settings.rdb_every
        return (crash_us // every) * every if every else None
    return None


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """A fault with everything drawn: what the injector will do, and when."""

    at_us: int
    fault: str
    replicas: tuple[int, ...] = ()
    duration_us: int = 0
    restart_after_us: int | None = None
    direction: str = "both"
    lag_us: int = 0
    extra_us: int = 0
    call: str | None = None
    count: int = 1
    migration: bool = False
    shard: int | None = None
    """A server fault's shard on a cluster; None: every shard (or the one server).
    A slot migration's: the shard the slot moves to."""
    slot: int | None = None
    """A slot migration's slot."""


def _poisson_times(rate_per_second: float, until_us: int, rng: random.Random) -> list[int]:
    times, now = [], 0.0
    rate_per_us = rate_per_second / 1e6
    while rate_per_us > 0:
        now += rng.expovariate(rate_per_us)
        if now >= until_us:
            return times
        times.append(int(now))
    return times


def plan(faults: Faults, replicas: int, until_us: int, streams,
         shards: int | None = None) -> list[PlannedFault]:
    """Every fault of the run, in time order (ties: the order drawn). On a
    cluster of ``shards``, each rate-drawn server fault hits one shard, drawn
    (after the fault's own draws) from the same stream."""
    until_us = faults.until if faults.until is not None else until_us

    def shard_from(rng: random.Random) -> int | None:
        return None if shards is None else rng.randrange(shards)

    def kept(spec: ServerFaultRate, fault: PlannedFault) -> list[PlannedFault]:
        # Drawn whatever ``shards`` says, so the other shards' faults fall as before.
        allowed = spec.shards is None or fault.shard is None or fault.shard in spec.shards
        return [fault] if allowed else []
    planned: list[PlannedFault] = []
    for index in range(replicas) if faults.crash else ():
        rng = streams.get("faults", "crash", index)
        for at in _poisson_times(faults.crash.rate, until_us, rng):
            restart = faults.crash.restart_after
            planned.append(PlannedFault(at, "crash", (index,),
                                        restart_after_us=max(0, restart.sample(rng))
                                        if restart is not None else None))
    for index in range(replicas) if faults.pause else ():
        rng = streams.get("faults", "pause", index)
        for at in _poisson_times(faults.pause.rate, until_us, rng):
            planned.append(PlannedFault(at, "pause", (index,),
                                        duration_us=max(0, faults.pause.duration.sample(rng))))
    if faults.partition:
        rng = streams.get("faults", "partition")
        spec = faults.partition
        for at in _poisson_times(spec.rate, until_us, rng):
            cut = tuple(sorted(rng.sample(range(replicas), min(spec.replicas, replicas))))
            planned.append(PlannedFault(at, "partition", cut, direction=spec.direction,
                                        duration_us=max(0, spec.duration.sample(rng))))
    if faults.server_restart:
        rng = streams.get("faults", "server_restart")
        for at in _poisson_times(faults.server_restart.rate, until_us, rng):
            down_us = max(0, faults.server_restart.down_for.sample(rng))
            planned += kept(faults.server_restart, PlannedFault(
                at, "server_restart", duration_us=down_us, shard=shard_from(rng)))
    if faults.failover:
        rng = streams.get("faults", "failover")
        for at in _poisson_times(faults.failover.rate, until_us, rng):
            down_us = max(0, faults.failover.down_for.sample(rng))
            planned += kept(faults.failover, PlannedFault(
                at, "failover", lag_us=faults.failover.lag, duration_us=down_us,
                shard=shard_from(rng)))
    if faults.latency_spike:
        rng = streams.get("faults", "latency_spike")
        spec = faults.latency_spike
        for at in _poisson_times(spec.rate, until_us, rng):
            duration_us = max(0, spec.duration.sample(rng))
            planned += kept(spec, PlannedFault(at, "latency_spike", duration_us=duration_us,
                                               extra_us=max(0, spec.extra.sample(rng)),
                                               shard=shard_from(rng)))
    for name in CONNECTION_FAULT_NAMES:
        spec = getattr(faults, name)
        for index in range(replicas) if spec else ():
            rng = streams.get("faults", name, index)
            for at in _poisson_times(spec.rate, until_us, rng):
                extra = max(0, spec.extra.sample(rng)) if name == "slow_reply" else 0
                planned.append(PlannedFault(at, name, (index,), extra_us=extra, call=spec.call))
    for item in faults.schedule:
        if FAULT_KINDS[item.fault].operator:
            continue  # the run's operations carry it out (``Scenario.operations``)
        targets = tuple(item.replicas) or ((item.replica,) if item.replica is not None else ())
        duration = item.duration if item.duration is not None else item.down_for
        planned.append(PlannedFault(item.at, item.fault, targets, duration_us=duration,
                                    restart_after_us=item.restart_after,
                                    direction=item.direction, lag_us=item.lag,
                                    extra_us=item.extra, call=item.call, count=item.count,
                                    migration=item.migration, shard=item.shard,
                                    slot=item.moving_slot))
    return sorted(planned, key=lambda fault: fault.at_us)
