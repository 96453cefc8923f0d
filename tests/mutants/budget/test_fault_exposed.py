"""Fault-exposed budget mutants are blamed on the store, and only once a fault
shows them (issue 24).

For each entry of ``mutants.budget.CATALOGUE``, its scenario is run with the
mutant and with the fixed kind it was derived from, on the same seed and
schedule:

* every invariant on which the mutant does worse than the fixed store has at
  least 95% of its damage filed under ``store_logic``, with the exposing fault
  named (``<metric>_exposed_by``), and the run says where the damage began;
* the fixed store under the same schedule has nothing filed there;
* with the exposing faults removed, the mutant does no harm the fixed store
  does not (it is fault-exposed: nothing else shows it).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from mutants.budget import FaultExposed, catalogue
from simulator.families import invariants_for
from simulator.plugin.contracts import BEGAN, exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores import registry
from tests.blame import blamed_on_the_store, store_logic_excess

STORE_SHARE = 0.95
SEED = 1


@functools.cache
def mutants() -> dict[str, FaultExposed]:
    return {mutant.name: mutant for mutant in catalogue()}


def with_kind(mutant: FaultExposed, kind: str, exposed: bool = True) -> dict[str, Any]:
    """The mutant's scenario with ``kind`` in its slot, with or without the
    faults that expose it."""
    data = copy.deepcopy(mutant.scenario)
    if mutant.slot == "store":
        data["store"] = kind
    else:
        data["migrations"][0]["to"] = kind
    if not exposed:
        for section in mutant.exposing:
            data.pop(section, None)
        if "migrations" in mutant.unexposed:
            for step in data["migrations"]:
                step.pop("crash_after_commands", None)
    return data


@functools.cache
def summary(name: str, which: str, exposed: bool = True) -> dict[str, Any]:
    mutant = mutants()[name]
    kind = mutant.kind if which == "mutant" else mutant.derived_from
    return run_scenario(parse_scenario(with_kind(mutant, kind, exposed)), seed=SEED).summary


def test_there_are_at_least_eight_and_each_cites_its_seed():
    assert len(mutants()) >= 8
    for mutant in mutants().values():
        assert mutant.seed.partition(":")[2], mutant.name
        assert mutant.kind in registry.kinds()


@pytest.mark.parametrize("name", sorted(mutants()))
def test_the_mutants_damage_is_the_stores_exposed_by_its_fault(name):
    mutant = mutants()[name]
    broken, fixed = summary(name, "mutant"), summary(name, "fixed")
    judged = []
    for invariant in invariants_for(registry.get(broken["store"])):
        excess, store = store_logic_excess(invariant, broken, fixed)
        if excess <= 0:
            continue
        judged.append(invariant.metric)
        assert store >= STORE_SHARE * excess, (
            f"{invariant.metric}: {broken[invariant.metric]} against the fixed store's "
            f"{fixed.get(invariant.metric)}, store_logic {store}: {invariant.causes(broken)}")
        exposed = broken.get(exposed_by_key(invariant.metric))
        assert exposed is not None and mutant.exposed_by in exposed, (invariant.metric, exposed)
    assert judged, "the mutant did no worse than the fixed store"
    assert broken.get(BEGAN), "no account of where the store's damage began"


@pytest.mark.parametrize("name", sorted(mutants()))
def test_the_fixed_store_under_the_same_schedule_is_never_blamed(name):
    assert blamed_on_the_store(summary(name, "fixed")) == {}


@pytest.mark.parametrize("name", sorted(mutants()))
def test_without_its_fault_the_mutant_does_no_harm(name):
    assert blamed_on_the_store(summary(name, "mutant", exposed=False)) == {}
