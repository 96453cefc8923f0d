"""Hypothesis strategies for fault schedules, for ``hunt`` and for your own tests.

A schedule is a list of ``[[faults.schedule]]`` entries (plain dicts, exactly
what a scenario or a race report holds), so whatever a strategy draws can be
written down and replayed. Shrinking works as for any Hypothesis list: fewer
faults, earlier times, lower replica numbers, smaller counts.

A property test an engineer might write against their own store variant::

    import tomllib
    from pathlib import Path

    from hypothesis import given, settings
    from simulator.run.compose import run_scenario
    from simulator.scenario.model import parse_scenario
    from simulator.search.strategies import fault_schedules

    BASE = tomllib.loads(Path("data/scenarios/my-store.toml").read_text())

    @settings(max_examples=25, deadline=None, database=None)
    @given(fault_schedules(replicas=5, until="3s", kinds=["lose_reply", "crash"],
                           calls=["settle_v1", "HDEL"]))
    def test_no_fault_schedule_makes_my_store_lose_spend(schedule):
        scenario = {**BASE, "faults": {"schedule": schedule}}
        summary = run_scenario(parse_scenario(scenario), seed=1).summary
        assert summary["conservation_drift_microdollars_total"] >= 0

``tests/simulator/test_hunt.py`` runs a property test of exactly this shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from simulator.scenario.faults import FAULT_KINDS, HUNTED_FAULTS, SHARD_FAULTS
from stores.quantities import parse_duration_us

REPLICA_FAULTS = HUNTED_FAULTS
"""What a hunt draws unless told otherwise (``FAULT_KINDS``' hunted kinds)."""
CONNECTION_FAULTS = tuple(name for name, kind in FAULT_KINDS.items() if kind.connection)
OPERATOR_ACTIONS = tuple(name for name, kind in FAULT_KINDS.items() if kind.operator)
"""An operator's actions: a migration (a step of the scenario's [[migrations]],
at a drawn instant with drawn timings, stray replicas left on the old kind, a
kill part-way), a rolling restart, a configuration change (a cap or a TTL,
rolled out replica by replica)."""
SERVER_FAULTS = SHARD_FAULTS
"""What hits the server (on a cluster, one shard of it, drawn): a restart
losing what its persistence did not keep, a failover to a replica lagging by
a drawn time, a latency spike."""
ALL_FAULTS = (REPLICA_FAULTS + ("partition",) + CONNECTION_FAULTS + OPERATOR_ACTIONS
              + SERVER_FAULTS)
"""Every fault a strategy can draw (``--faults`` on ``hunt``)."""
EVERY_KIND = ("all",)
"""``--faults all``: every kind the scenario can take (``every_kind``)."""
INVOLVED = 3
"""The most replicas one schedule's replica faults hit between them (see
``involved_replica``)."""
KILL_POINTS = 50
"""The commands a migration may be killed after when its length is unknown."""
SHORT = ("100ms", "1s", "3s")
"""Pause durations and restart times drawn when the scenario gives no timescales."""


def durations_around(timescales: Sequence[int], longest_us: int | None = None) -> list[str]:
    """Durations to draw pauses, partitions and operators' timings from: a
    tenth of a second, a second, three, and each of the scenario's own
    timescales (``timescales``, in µs: its timeout, its store's TTLs and
    periods) halved, just passed (by a tenth) and doubled, so a pause can
    outlast a TTL whatever its size; shortest first (what shrinking prefers),
    none past ``longest_us``."""
    found = {parse_duration_us(text) for text in SHORT}
    for scale in timescales:
        found.update({scale // 2, scale + scale // 10, scale * 2})
    kept = sorted(value for value in found
                  if value >= 1_000 and (longest_us is None or value <= longest_us))
    return [f"{value // 1_000}ms" for value in kept]


def involved_replica(replicas: int) -> st.SearchStrategy[int]:
    """A replica among the few one schedule involves: up to ``INVOLVED`` of
    the fleet, drawn once per schedule, that each of its faults picks from.

    Races compose on the same replicas: a stray writer a migration forgot is
    the one paused through it, a crashed replica is the one whose reply was
    lost. Drawn independently over a fleet of tens, two faults meet on one
    replica once in tens of schedules; from a shared few, about half the
    time. Nothing is lost: any schedule of up to ``INVOLVED`` distinct
    replicas is still drawn, and shrinking still moves them toward replica 0.
    """
    few = st.lists(st.integers(0, replicas - 1), min_size=1, max_size=INVOLVED, unique=True)
    return st.shared(few, key=f"simulator.search.involved.{replicas}").flatmap(st.sampled_from)


def fault(replicas: int, until: str | int, calls: Sequence[str] = (),
          kinds: Sequence[str] = REPLICA_FAULTS, migration: bool = False,
          only_migration: bool = False, migration_calls: Sequence[str] | None = None,
          timescales: Sequence[int] = (), steps: int = 0,
          migration_commands: int | None = None,
          reloads: Mapping[str, Sequence[Any]] | None = None,
          shards: int | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """One scheduled fault on a fleet of ``replicas`` before ``until``.

    ``calls`` are the labels a lost request or reply may target (script names
    such as ``"settle_v1"`` or verbs such as ``"HDEL"``); ``migration`` lets
    losses hit the operator's migration too, ``only_migration`` only it, aimed
    at ``migration_calls`` (default: ``calls``). A loss may also name no call
    (the next call of any label). Pauses, partitions and an operator's timings
    are drawn around the scenario's ``timescales`` (``durations_around``);
    ``migrate`` runs one of the scenario's ``steps`` [[migrations]] entries,
    maybe killed after any of its ``migration_commands`` (as many as a run of
    it sent; default ``KILL_POINTS``).
    ``reconfigure`` changes one of the settings ``reloads`` names to one of
    its values there (``simulator.scenario.reconfigure.drawn_values``).
    A server fault hits one of a cluster's ``shards`` (none: the one server).
    """
    until_us = parse_duration_us(until) if isinstance(until, str) else until
    until_ms = until_us // 1_000
    at = st.integers(0, max(0, until_ms - 1)).map(lambda ms: f"{ms}ms")
    replica = involved_replica(replicas)
    scaled = durations_around(timescales, 2 * until_us)
    lasting = st.sampled_from(scaled)
    call = st.sampled_from([None, *calls])
    migration_call = call if migration_calls is None else st.sampled_from(
        [None, *migration_calls])

    def on_calls(kind: str, **more: st.SearchStrategy[Any]) -> st.SearchStrategy[dict]:
        return st.fixed_dictionaries({"at": at, "fault": st.just(kind), "replica": replica,
                                      "call": call, "count": st.integers(1, 3), **more})

    def losses(kind: str) -> st.SearchStrategy[dict[str, Any]]:
        on_replica = on_calls(kind)
        on_migration = st.fixed_dictionaries(
            {"at": at, "fault": st.just(kind), "migration": st.just(True),
             "call": migration_call, "count": st.integers(1, 3)})
        if only_migration:
            return on_migration
        return on_replica | on_migration if migration else on_replica

    builders = {
        "lose_reply": losses("lose_reply"),
        "lose_request": losses("lose_request"),
        "crash": st.fixed_dictionaries(
            {"at": at, "fault": st.just("crash"), "replica": replica,
             "restart_after": st.sampled_from(["100ms", "1s"])}),
        "pause": st.fixed_dictionaries(
            {"at": at, "fault": st.just("pause"), "replica": replica, "duration": lasting}),
        "partition": st.fixed_dictionaries(
            {"at": at, "fault": st.just("partition"),
             "replicas": st.lists(replica, min_size=1, max_size=3, unique=True).map(sorted),
             "duration": lasting,
             "direction": st.sampled_from(["both", "to-server", "from-server"])}),
        "rolling_restart": st.fixed_dictionaries(
            {"at": at, "fault": st.just("rolling_restart"), "every": lasting,
             "down_for": st.sampled_from(["0ms", *scaled])}),
        "migrate": _migrate(at, replica, steps, scaled, migration_commands or KILL_POINTS),
        "reconfigure": _reconfigure(at, replica, reloads or {}, scaled),
        "connection_stall": on_calls("connection_stall"),
        "connection_reset": on_calls("connection_reset"),
        "slow_reply": on_calls("slow_reply", extra=st.sampled_from(["300ms", "1s"])),
        "dropped_waiter": on_calls("dropped_waiter"),
        **_server_faults(at, shards, lasting, st.sampled_from(["0ms", *scaled])),
    }
    return st.one_of(*(builders[kind] for kind in kinds)).map(_without_nones)


def _server_faults(at: st.SearchStrategy[str], shards: int | None,
                   lasting: st.SearchStrategy[str], down_for: st.SearchStrategy[str]
                   ) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """A server restart, a failover (its replica lagging by a drawn time) and
    a latency spike, each on a drawn shard of a cluster (shrinking toward 0)."""
    shard = st.integers(0, shards - 1) if shards else st.none()
    return {
        "server_restart": st.fixed_dictionaries(
            {"at": at, "fault": st.just("server_restart"), "shard": shard,
             "down_for": down_for}),
        "failover": st.fixed_dictionaries(
            {"at": at, "fault": st.just("failover"), "shard": shard,
             "lag": st.sampled_from(["0ms", "100ms", "1s", "3s"]), "down_for": down_for}),
        "latency_spike": st.fixed_dictionaries(
            {"at": at, "fault": st.just("latency_spike"), "shard": shard,
             "duration": lasting, "extra": st.sampled_from(["50ms", "300ms", "1s"])}),
    }


def _migrate(at: st.SearchStrategy[str], replica: st.SearchStrategy[int], steps: int,
             scaled: Sequence[str], commands: int) -> st.SearchStrategy[dict[str, Any]]:
    """An operator's migration: one of the ``steps`` declared, at a drawn
    instant, with a restart time drawn from ``scaled``, up to two replicas forgotten on the
    old kind, maybe killed after any one of its ``commands``, the fleet maybe left
    running, maybe run once more beside the serving fleet a drawn time after
    it restarted (the recovery from a stray writer: one entry, not two that
    must meet by chance), its strays maybe hung through it for a drawn time
    (why the operator missed them); each shrinks toward the plain procedure."""
    if steps < 1:
        return st.nothing()
    return st.fixed_dictionaries(
        {"at": at, "fault": st.just("migrate"), "step": st.integers(0, steps - 1),
         "restart_after": st.sampled_from(["0ms", *scaled]),
         "keep_running": st.lists(replica, max_size=2, unique=True).map(sorted),
         "crash_after_commands": st.none() | st.integers(1, commands),
         "stop_fleet": st.sampled_from([True, False]),
         "again_after": st.none() | st.sampled_from(scaled),
         "strays_hung_for": st.none() | st.sampled_from(scaled)})


def _reconfigure(at: st.SearchStrategy[str], replica: st.SearchStrategy[int],
                 reloads: Mapping[str, Sequence[Any]],
                 scaled: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    """An operator's configuration change: one of the ``reloads`` settings to
    one of its values (gentlest first), at a drawn instant, rolled out with a
    pace and a downtime drawn from ``scaled``, maybe to up to two replicas
    only (the rest left on the old settings). Each shrinks toward a gentle
    change rolled out quickly to the whole fleet."""
    if not reloads:
        return st.nothing()
    change = st.one_of(*(st.fixed_dictionaries({name: st.sampled_from(list(values))})
                         for name, values in reloads.items()))
    return st.fixed_dictionaries(
        {"at": at, "fault": st.just("reconfigure"), "settings": change,
         "every": st.sampled_from(scaled), "down_for": st.sampled_from(["0ms", *scaled]),
         "replicas": st.lists(replica, max_size=2, unique=True).map(sorted)})


def fault_schedules(replicas: int, until: str | int, calls: Sequence[str] = (),
                    kinds: Sequence[str] = REPLICA_FAULTS, migration: bool = False,
                    max_faults: int = 4, only_migration: bool = False,
                    migration_calls: Sequence[str] | None = None,
                    timescales: Sequence[int] = (), steps: int = 0,
                    migration_commands: int | None = None,
                    reloads: Mapping[str, Sequence[Any]] | None = None,
                    shards: int | None = None, swarm: bool = False
                    ) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A schedule of up to ``max_faults`` faults (see ``fault``), in time order.

    With ``swarm``, each schedule first draws which of ``kinds`` it may use (a
    non-empty subset, swarm testing): a rare kind gets whole schedules of its
    own and kinds meet in every combination, where drawing every fault from
    all the kinds would spread each schedule thin over them. Shrinking moves
    the subset toward the first kinds listed."""
    def schedules(chosen: Sequence[str]) -> st.SearchStrategy[list[dict[str, Any]]]:
        return st.lists(fault(replicas, until, calls, chosen, migration, only_migration,
                              migration_calls, timescales, steps, migration_commands,
                              reloads, shards),
                        min_size=1, max_size=max_faults)

    drawn = (st.lists(st.sampled_from(list(kinds)), min_size=1, max_size=len(kinds),
                      unique=True).map(lambda subset: [kind for kind in kinds if kind in subset])
             .flatmap(schedules)
             if swarm and len(kinds) > 1 else schedules(kinds))
    return drawn.map(
        lambda faults: sorted(faults, key=lambda item: parse_duration_us(item["at"])))


def every_kind(migrations: bool, reloads: bool, cluster_replicas: bool | None
               ) -> tuple[str, ...]:
    """Every fault kind a scenario can take (``--faults all``): an operator's
    migration only where it declares [[migrations]], a configuration change
    only where its store reloads a setting it is configured with, a failover
    only off a cluster or on one whose shards have replicas
    (``cluster_replicas``: None off a cluster)."""
    return tuple(kind for kind in ALL_FAULTS
                 if (kind != "migrate" or migrations) and (kind != "reconfigure" or reloads)
                 and (kind != "failover" or cluster_replicas is not False))


def _without_nones(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if value is not None}
