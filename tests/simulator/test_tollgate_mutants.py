"""The tollgate mutants (``tests/mutants/tollgate/``): each a bug on a path only
a fault takes, each blamed on the store under the schedule that exposes it.

For each mutant, its scenario (the family's small fleet and its exposing
schedule) is run with the mutant and with the fixed ledger, on one seed:

* every invariant the mutant breaks (its ``damage``) is nonzero, and on every
  invariant where it does worse than the fixed ledger at least 95% of that
  excess is filed under ``store_logic``, with the exposing fault named (its
  ``fault`` class, never "no fault");
* the fixed ledger under the same schedule is blamed for nothing, and the
  store-logic part is within 5% of what the mutant adds over it (removing
  the bug removes the damage filed ``store_logic``);
* without the schedule, the mutant does no damage: the bug is fault-exposed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from blame import blamed_on_the_store, store_logic_excess
from mutants.tollgate import CATALOGUE, LedgerMutant, base_scenario, catalogue, merged

from simulator.families.tollgate.invariants import INVARIANTS
from simulator.plugin.contracts import NO_FAULT, exposed_by_key
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores import registry

SEED = 1
STORE_SHARE = 0.95
COUNTERFACTUAL_TOLERANCE = 0.05
"""How far the store-logic part may stand from the damage the bug adds over
the fixed ledger (the counterfactual: the same schedule, the bug removed)."""


@pytest.fixture(scope="module")
def mutants() -> Iterator[dict[str, LedgerMutant]]:
    """The catalogue, its kinds registered for this module only."""
    with pytest.MonkeyPatch.context() as patch:
        for table in ("_REGISTERED", "_ORIGINS"):
            patch.setattr(registry, table, dict(getattr(registry, table)))
        found = catalogue()
        for name in CATALOGUE:
            kind = sys.modules[f"mutants.tollgate.{name}"].KIND
            if kind.name not in registry._REGISTERED:
                registry.register(kind)
        yield {mutant.name: mutant for mutant in found}


def summary_of(scenario: dict) -> dict:
    return run_scenario(parse_scenario(scenario), seed=SEED).summary


def test_there_are_at_least_eight_fault_exposed_mutants():
    assert len(CATALOGUE) >= 8


@pytest.mark.parametrize("name", CATALOGUE)
def test_a_mutant_s_damage_is_the_store_s_exposed_by_its_fault(mutants, name):
    mutant = mutants[name]
    variant = summary_of(mutant.scenario())
    fixed = summary_of(mutant.fixed_scenario())
    for metric in mutant.damage:
        assert variant[metric], f"{metric}: the mutant did no damage"
    judged = []
    for invariant in INVARIANTS:
        excess, store = store_logic_excess(invariant, variant, fixed)
        if excess <= 0:
            continue
        judged.append(invariant.metric)
        assert store >= STORE_SHARE * excess, (invariant.metric, invariant.causes(variant))
        # The counterfactual agrees: the fixed ledger under the same schedule
        # (the bug removed) removes what was filed store_logic, within 5%.
        assert abs(store - excess) <= COUNTERFACTUAL_TOLERANCE * excess, (
            invariant.metric, store, excess)
        exposed = variant.get(exposed_by_key(invariant.metric))
        assert exposed not in (None, NO_FAULT), f"{invariant.metric}: no exposing fault"
        assert exposed.startswith(mutant.fault), (invariant.metric, exposed)
    assert set(mutant.damage) <= set(judged)
    assert variant["store_logic_began"]
    assert blamed_on_the_store(fixed) == {}


@pytest.mark.parametrize("name", CATALOGUE)
def test_without_its_fault_a_mutant_does_no_damage(mutants, name):
    mutant = mutants[name]
    quiet = merged(base_scenario(), {"store": mutant.kind})
    assert blamed_on_the_store(summary_of(quiet)) == {}
