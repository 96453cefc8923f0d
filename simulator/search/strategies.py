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

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from simulator.scenario.faults import FAULT_KINDS, HUNTED_FAULTS
from stores.quantities import parse_duration_us

REPLICA_FAULTS = HUNTED_FAULTS
"""What a hunt draws unless told otherwise (``FAULT_KINDS``' hunted kinds)."""
CONNECTION_FAULTS = tuple(name for name, kind in FAULT_KINDS.items() if kind.connection)
ALL_FAULTS = REPLICA_FAULTS + CONNECTION_FAULTS
"""Every fault a strategy can draw (``--faults`` on ``hunt``)."""


def fault(replicas: int, until: str | int, calls: Sequence[str] = (),
          kinds: Sequence[str] = REPLICA_FAULTS, migration: bool = False,
          only_migration: bool = False, migration_calls: Sequence[str] | None = None
          ) -> st.SearchStrategy[dict[str, Any]]:
    """One scheduled fault on a fleet of ``replicas`` before ``until``.

    ``calls`` are the labels a lost request or reply may target (script names
    such as ``"settle_v1"`` or verbs such as ``"HDEL"``); ``migration`` lets
    losses hit the operator's migration too, ``only_migration`` only it, aimed
    at ``migration_calls`` (default: ``calls``). A loss may also name no call
    (the next call of any label).
    """
    until_ms = parse_duration_us(until) // 1_000 if isinstance(until, str) else until // 1_000
    at = st.integers(0, max(0, until_ms - 1)).map(lambda ms: f"{ms}ms")
    replica = st.integers(0, replicas - 1)
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
            {"at": at, "fault": st.just("pause"), "replica": replica,
             "duration": st.sampled_from(["100ms", "1s", "3s"])}),
        "connection_stall": on_calls("connection_stall"),
        "connection_reset": on_calls("connection_reset"),
        "slow_reply": on_calls("slow_reply", extra=st.sampled_from(["300ms", "1s"])),
        "dropped_waiter": on_calls("dropped_waiter"),
    }
    return st.one_of(*(builders[kind] for kind in kinds)).map(_without_nones)


def fault_schedules(replicas: int, until: str | int, calls: Sequence[str] = (),
                    kinds: Sequence[str] = REPLICA_FAULTS, migration: bool = False,
                    max_faults: int = 4, only_migration: bool = False,
                    migration_calls: Sequence[str] | None = None
                    ) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A schedule of up to ``max_faults`` faults (see ``fault``), in time order."""
    return st.lists(fault(replicas, until, calls, kinds, migration, only_migration,
                          migration_calls),
                    min_size=1,
                    max_size=max_faults).map(
        lambda faults: sorted(faults, key=lambda item: parse_duration_us(item["at"])))


def _without_nones(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if value is not None}
