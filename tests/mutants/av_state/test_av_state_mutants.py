"""The av_state mutant suite: each fault-exposed broken store is caught, and
blamed on the store, with what exposed it named.

For each mutant of ``CATALOGUE``, its scenario (``BASE`` with the mutant's
change: the workload path, the fault schedule that exposes the bug) is run
with the mutant and with the fixed store (``av_state.redis``), on the same
seed:

* each invariant of its ``damage`` is broken: worse than the fixed store;
* on every invariant where the mutant does worse than the fixed store, at
  least 95% of the excess is ``store_logic`` (``tests.blame.store_logic_excess``),
  and the summary names what exposed it (``<metric>_exposed_by``);
* the fixed store, under the same schedule, has nothing filed under
  ``store_logic``: the rule that blames the mutant comes from the contract,
  and a sound store keeps it.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from blame import blamed_on_the_store, store_logic_excess
from scenario_data import merge

from mutants.av_state import BASE, CATALOGUE, FIXED, Mutant, catalogue
from simulator.families import invariants_for
from simulator.plugin.contracts import exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores import registry

STORE_SHARE = 0.95
COUNTERFACTUAL_TOLERANCE = 0.05
"""How far the store-logic part may exceed the damage the bug adds over the
fixed store (the counterfactual view), as a share of the mutant's damage."""
MUTANTS = {mutant.name: mutant for mutant in catalogue()}


@functools.cache
def summaries(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The mutant's summary and the fixed store's, same scenario and seed."""
    mutant = MUTANTS[name]
    data = merge(merge(BASE, mutant.scenario), {"name": f"av-state-mutant-{name}"})
    runs = []
    for kind in (mutant.kind, FIXED):
        runs.append(run_scenario(parse_scenario(merge(data, {"store": kind})),
                                 seed=mutant.seed).summary)
    return runs[0], runs[1]


def test_the_catalogue_has_at_least_eight_mutants_each_citing_the_seed():
    assert len(CATALOGUE) >= 8 and set(CATALOGUE) == set(MUTANTS)
    for mutant in MUTANTS.values():
        assert mutant.violates.startswith("004_3d0b2b7832cd8f83.txt:"), mutant.name
        assert registry.get(mutant.kind).summary == mutant.breaks


@pytest.mark.parametrize("name", CATALOGUE)
def test_a_mutant_s_damage_is_the_store_s_exposed_by_what_showed_it(name):
    mutant: Mutant = MUTANTS[name]
    variant, fixed = summaries(name)
    invariants = {invariant.metric: invariant
                  for invariant in invariants_for(registry.get(mutant.kind))}
    for metric in mutant.damage:
        excess, _ = store_logic_excess(invariants[metric], variant, fixed)
        assert excess > 0, f"{metric}: {variant[metric]} against the fixed store's {fixed[metric]}"
    for metric, invariant in invariants.items():
        excess, store = store_logic_excess(invariant, variant, fixed)
        if excess <= 0:
            continue
        assert store >= STORE_SHARE * excess, (metric, variant[metric], fixed[metric],
                                               invariant.causes(variant))
        exposed = variant.get(exposed_by_key(metric))
        assert exposed is not None, f"{metric}: no exposure"
        if metric in mutant.damage:
            assert mutant.exposed_by in exposed, (metric, exposed)


@pytest.mark.parametrize("name", CATALOGUE)
def test_the_fixed_store_under_the_mutant_s_schedule_is_never_blamed(name):
    _, fixed = summaries(name)
    assert fixed["calls_committed"] > 0
    assert blamed_on_the_store(fixed) == {}


@pytest.mark.parametrize("name", CATALOGUE)
def test_removing_the_bug_removes_the_damage_filed_under_store_logic(name):
    """The counterfactual view agrees: the fixed store under the same schedule
    does the mutant's damage less its store-logic part, within the tolerance
    (or the mutant says why the two views differ)."""
    mutant: Mutant = MUTANTS[name]
    variant, fixed = summaries(name)
    invariants = {invariant.metric: invariant
                  for invariant in invariants_for(registry.get(mutant.kind))}
    for metric in mutant.damage:
        excess, store = store_logic_excess(invariants[metric], variant, fixed)
        slack = COUNTERFACTUAL_TOLERANCE * abs(variant[metric])
        if mutant.counterfactual_differs:
            assert store > excess + slack, (metric, store, excess)  # as its reason says
        else:
            assert excess - slack <= store <= excess + slack, (metric, store, excess)
