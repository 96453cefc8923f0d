"""The mutant suite: the lab catches every broken store and blames the store.

For each mutant of the catalogue (``tests/mutants/``), its committed scenario
is run with no fault injected, once with the mutant and once with the fixed
kind it was derived from, on the same seed:

* the lab detects it: each damage of its catalogue entry is nonzero with the
  mutant, and zero with the fixed store;
* the damage is the store's: at least 95% of each is attributed to the cause
  ``store_logic``, since nothing the lab injected can explain it;
* the fixed store has nothing attributed to ``store_logic``, in any damage.

With faults on as well, the store's share of the damage stays within a stated
tolerance of what the counterfactual mode says: the damage that remains when
the one injected fault class is removed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from mutants import CATALOGUE, DAMAGE, SCENARIOS, Mutant, catalogue
from simulator.counterfactual import counterfactual
from simulator.run import run_scenario
from simulator.scenario import load_scenario
from stores.registry import get

STORE_LOGIC = "store_logic"
SEED = 1
STORE_SHARE_AT_LEAST = 0.95

MUTANTS = {mutant.name: mutant for mutant in catalogue()}

# Per damage: the summary's total, and its split by cause (``{cause}`` filled
# in). The namespace scope has the same names with a ``namespace_`` prefix.
METRICS = {
    "overshoot": ("cap_overshoot_microdollars_total", "cap_overshoot_by_{cause}_microdollars"),
    "drift": ("conservation_drift_microdollars_total",
              "conservation_drift_by_{cause}_microdollars"),
    "leaks": ("leaked_hold_microdollar_seconds", "leaked_hold_microdollar_seconds_by_{cause}"),
    "false_denials": ("false_denials", "false_denials_by_{cause}"),
    "wrongful_admissions": ("wrongful_admissions", "wrongful_admissions_by_{cause}"),
}
assert set(METRICS) == set(DAMAGE)


def metric_names(damage: str, cause: str = STORE_LOGIC) -> tuple[str, str]:
    """The summary's total of ``damage`` and its part filed under ``cause``."""
    scope = "namespace_" if damage.startswith("namespace_") else ""
    total, by_cause = METRICS[damage.removeprefix(scope)]
    return scope + total, scope + by_cause.format(cause=cause)


def read(summary: Mapping[str, Any], name: str) -> Any:
    assert name in summary, f"the summary has no {name!r}"
    return summary[name]


def damage_total(summary: Mapping[str, Any], damage: str) -> float:
    """How much ``damage`` the run did (drift counts either way)."""
    return abs(read(summary, metric_names(damage)[0]))


def store_share(summary: Mapping[str, Any], damage: str) -> float:
    """The store's share of ``damage``: |by store_logic| / |total| (0 when
    there is no damage)."""
    total = damage_total(summary, damage)
    if not total:
        return 0.0
    return abs(read(summary, metric_names(damage)[1])) / total


@functools.cache
def summary_of(scenario: str, slot: str, kind: str,
               overrides: tuple[tuple[str, Any], ...] = ()) -> Mapping[str, Any]:
    """The summary of a run (kept: the fixed stores' runs are shared)."""
    return run_scenario(load_scenario(scenario, {slot: kind, **dict(overrides)}),
                        seed=SEED).summary


def mutant_run(mutant: Mutant) -> Mapping[str, Any]:
    return summary_of(str(mutant.scenario_path), mutant.slot, mutant.kind)


def fixed_run(mutant: Mutant) -> Mapping[str, Any]:
    return summary_of(str(mutant.scenario_path), mutant.slot, mutant.derived_from)


def test_the_catalogue_has_a_dozen_mutants_in_lua_and_python_on_redis_and_in_memory():
    mutants = list(MUTANTS.values())
    assert len(mutants) >= 12
    assert [mutant.name for mutant in mutants] == list(CATALOGUE)
    assert {mutant.language for mutant in mutants} == {"lua", "python"}
    backends = {backend for mutant in mutants for backend in get(mutant.kind).backends}
    assert backends == {"redis", "memory"}
    for mutant in mutants:
        assert {damage.removeprefix("namespace_") for damage in mutant.damage} <= set(DAMAGE)
        assert get(mutant.kind).summary == mutant.breaks


@pytest.mark.parametrize("name", MUTANTS)
def test_the_lab_detects_the_mutant(name):
    mutant = MUTANTS[name]
    summary, fixed = mutant_run(mutant), fixed_run(mutant)
    for damage in mutant.damage:
        assert damage_total(summary, damage) > 0, f"{damage} not seen"
        assert damage_total(fixed, damage) == 0, f"the fixed store shows {damage} too"


@pytest.mark.parametrize("name", MUTANTS)
def test_without_faults_the_mutants_damage_is_attributed_to_the_store(name):
    mutant = MUTANTS[name]
    summary = mutant_run(mutant)
    shares = {damage: store_share(summary, damage) for damage in mutant.damage}
    assert all(share >= STORE_SHARE_AT_LEAST for share in shares.values()), shares


FIXED_RUNS = sorted({(mutant.derived_from, mutant.scenario, mutant.slot)
                     for mutant in MUTANTS.values()})


@pytest.mark.parametrize(("kind", "scenario", "slot"), FIXED_RUNS,
                         ids=[f"{kind}-{scenario}" for kind, scenario, _ in FIXED_RUNS])
def test_the_fixed_store_has_no_damage_attributed_to_the_store(kind, scenario, slot):
    mutant = next(mutant for mutant in MUTANTS.values()
                  if (mutant.derived_from, mutant.scenario, mutant.slot) == (kind, scenario, slot))
    summary = fixed_run(mutant)
    for damage in mutant.damage:
        read(summary, metric_names(damage)[1])  # the attribution exists, so zero means zero
    blamed = {name: value for name, value in summary.items()
              if STORE_LOGIC in name and value}
    assert blamed == {}


# With faults on. Each case injects faults whose damage mixes with the bug's,
# and names the fault class whose removal leaves no fault in effect (retries
# do nothing once no reply is lost). The counterfactual mode's run without it
# is then the store alone, and the store's counterfactual share is the damage
# left there over the damage with the faults (at most 1: a fault can also
# hide some of the bug's damage, e.g. a crashed request never settles, so the
# mutant never forgets its hold). The mechanistic attribution is a different
# question (docs/metrics.md): where the fault and the bug act on the same
# request -- a retried settlement that the mutant charges twice each time --
# it splits that request's damage between them, where the counterfactual
# gives all of it to the fault. So the two must agree within TOLERANCE, not
# exactly.
TOLERANCE = 0.15


class FaultedCase(NamedTuple):
    mutant: str
    damage: str
    faults: tuple[tuple[str, Any], ...]
    """Scenario overrides that inject the faults."""
    removed: str
    """The counterfactual fault class whose removal leaves no fault in effect."""
    count: str
    """A summary count that shows the faults happened."""


FAULTED = {
    "settle_charges_twice-retried_settlements": FaultedCase(
        "settle_charges_twice", "drift",
        (("network.reply_loss", 0.02), ("network.retries", 2)), "reply_loss",
        "duplicate_execution_count"),
    "reserve_ignores_live_holds-lost_requests": FaultedCase(
        "reserve_ignores_live_holds", "overshoot", (("network.request_loss", 0.02),),
        "request_loss", "request_lost_count"),
    "settle_forgets_hold-crashes": FaultedCase(
        "settle_forgets_hold", "leaks",
        (("faults.crash", {"rate": "1/10s", "restart_after": "200ms"}),), "crash",
        "fault_crash_count"),
}


@pytest.mark.parametrize("case", FAULTED)
def test_with_faults_the_stores_share_is_near_the_counterfactual_figure(case):
    mutant_name, damage, faults, removed, count = FAULTED[case]
    mutant = MUTANTS[mutant_name]
    scenario = load_scenario(mutant.scenario_path, {mutant.slot: mutant.kind, **dict(faults)})
    result = counterfactual(scenario, seed=SEED)
    assert result.baseline[count] > 0
    without_faults = next(run.summary for run in result.runs if run.fault_class.name == removed)
    with_faults = damage_total(result.baseline, damage)
    assert with_faults > 0
    counterfactual_share = min(1.0, damage_total(without_faults, damage) / with_faults)
    mechanistic_share = store_share(result.baseline, damage)
    assert abs(mechanistic_share - counterfactual_share) <= TOLERANCE, (
        f"{damage}: mechanistic store share {mechanistic_share:.3f}, "
        f"counterfactual {counterfactual_share:.3f}")


def test_the_metrics_doc_lists_every_mutant():
    text = (SCENARIOS.parents[1] / "docs" / "metrics.md").read_text(encoding="utf-8")
    _, _, section = text.partition("## Mutants: how the oracle is tested")
    assert [name for name in MUTANTS if f"| `{name}` (" not in section] == []
