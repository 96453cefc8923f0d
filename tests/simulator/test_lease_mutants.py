"""The lease family's fault-exposed mutants (``tests/mutants/leases/``): each
one's damage under the schedule that exposes it is the store's.

Each mutant breaks one rule of the seed on a path only a fault takes (a
compensation, a retry, a refusal, the read of a release's reply). Run under
its schedule beside the fixed store (same scenario, seed and schedule):

* it does strictly worse on some invariant of the family;
* on every invariant where it does worse, at least 95% of what it adds is
  ``store_logic``, and the verdict names the fault that exposed it;
* the fixed store under the same schedule has nothing filed under ``store_logic``.
"""

from __future__ import annotations

import functools

import pytest
from blame import blamed_on_the_store, store_logic_excess
from mutants.leases import FIXED, SCENARIO, LeaseMutant, catalogue

from simulator.families.axond_leases.invariants import INVARIANTS
from simulator.plugin.contracts import exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario

STORE_SHARE = 0.95
MUTANTS = {mutant.name: mutant for mutant in catalogue()}


@functools.cache
def summary(store: str, name: str) -> dict:
    """The summary of mutant ``name``'s schedule run on ``store``."""
    mutant = MUTANTS[name]
    scenario = load_scenario(SCENARIO, {"store": store,
                                        "faults": {"schedule": list(mutant.schedule)},
                                        **mutant.changes})
    return run_scenario(scenario, seed=scenario.seed).summary


def judged(mutant: LeaseMutant) -> list[tuple[str, float, float]]:
    """``(metric, excess over the fixed store, store_logic part)`` where it did worse."""
    variant, fixed = summary(mutant.kind, mutant.name), summary(FIXED, mutant.name)
    found = []
    for invariant in INVARIANTS:
        excess, store = store_logic_excess(invariant, variant, fixed)
        if excess > 0:
            found.append((invariant.metric, excess, store))
    return found


def test_there_are_at_least_eight_lease_mutants_each_citing_the_seed():
    assert len(MUTANTS) >= 8
    for mutant in MUTANTS.values():
        assert mutant.seed.startswith("002_348438d99c360737.txt:")
        assert mutant.schedule, mutant.name


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_mutant_s_added_damage_is_the_store_s_exposed_by_its_fault(name):
    mutant = MUTANTS[name]
    worse = judged(mutant)
    assert worse, f"{name} did no worse than the fixed store under its schedule"
    variant = summary(mutant.kind, name)
    for metric, excess, store in worse:
        assert store >= STORE_SHARE * excess, (metric, excess, store)
        assert variant[exposed_by_key(metric)] == mutant.exposed_by, metric


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_fixed_store_under_a_mutant_s_schedule_is_never_blamed(name):
    fixed = summary(FIXED, name)
    assert fixed["requests_completed"] > 0
    assert blamed_on_the_store(fixed) == {}
