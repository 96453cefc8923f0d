"""Swarm draws: each schedule's faults from a subset of the kinds, and
``--faults all``: every kind a scenario can take."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings

from simulator.search.hunt import Hunt
from simulator.search.strategies import ALL_FAULTS, every_kind, fault_schedules

ROOT = Path(__file__).resolve().parents[2]
LEASES = ROOT / "data" / "scenarios" / "hunt" / "axond-leases.toml"
KINDS = ("lose_reply", "lose_request", "crash", "pause", "partition", "connection_reset")


def drawn(swarm: bool, examples: int = 200) -> list[list[dict]]:
    seen: list[list[dict]] = []

    @settings(max_examples=examples, database=None, derandomize=True)
    @given(fault_schedules(5, "3s", ["acquire"], kinds=KINDS, max_faults=4, swarm=swarm))
    def collect(schedule: list[dict]) -> None:
        seen.append(schedule)

    collect()
    return seen


def one_kind_share(schedules: list[list[dict]]) -> float:
    """Of the schedules of three faults or more, the share whose faults are all of one kind."""
    long = [schedule for schedule in schedules if len(schedule) >= 3]
    return sum(len({fault["fault"] for fault in schedule}) == 1 for schedule in long) / len(long)


def test_a_swarm_schedule_draws_from_a_subset_of_the_kinds() -> None:
    swarm, plain = drawn(True), drawn(False)
    # Kinds drawn alone give whole schedules of one kind; drawn from all six,
    # three faults or more rarely share one.
    assert one_kind_share(swarm) > 2 * one_kind_share(plain)
    # Every kind still comes up, in both.
    for schedules in (swarm, plain):
        assert {fault["fault"] for schedule in schedules for fault in schedule} == set(KINDS)
    assert drawn(True) == swarm  # the same seed, the same schedules


def test_every_kind_is_what_the_scenario_can_take() -> None:
    everything = every_kind(migrations=True, reloads=True, cluster_replicas=True)
    assert everything == ALL_FAULTS
    assert "migrate" not in every_kind(migrations=False, reloads=True, cluster_replicas=None)
    assert "reconfigure" not in every_kind(migrations=False, reloads=False,
                                           cluster_replicas=None)
    assert "failover" not in every_kind(migrations=False, reloads=True, cluster_replicas=False)
    assert "failover" in every_kind(migrations=False, reloads=True, cluster_replicas=None)


def test_a_hunt_with_every_kind_draws_them_swarm_style() -> None:
    hunt = Hunt(LEASES, reference="axond_leases.redis", examples=0, kinds=("all",), swarm=True)
    assert set(hunt.kinds) == set(ALL_FAULTS) - {"migrate"}  # it declares no migration
    assert hunt.reloads  # a configuration change has something to change
