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
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from mutants import CATALOGUE, DAMAGE, HERE, SCENARIOS, Mutant, catalogue
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from simulator.search.counterfactual import counterfactual
from stores import registry

STORE_LOGIC = "store_logic"
SEED = 1
STORE_SHARE_AT_LEAST = 0.95


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
    there is no damage). A cause that chains to the store counts as the
    store's: a denial by a hold the store leaked is filed under
    ``leaked_holds_store_logic``."""
    total = damage_total(summary, damage)
    if not total:
        return 0.0
    read(summary, metric_names(damage)[1])
    return abs(sum(value for cause, value in parts(summary, damage).items()
                   if cause == STORE_LOGIC or cause.endswith(f"_{STORE_LOGIC}"))) / total


def parts(summary: Mapping[str, Any], damage: str) -> dict[str, float]:
    """``damage`` split by cause, as the summary files it."""
    before, _, after = metric_names(damage, cause="\0")[1].partition("\0")
    pattern = re.compile(f"{re.escape(before)}(.+){re.escape(after)}")
    return {match[1]: value for name, value in summary.items()
            if (match := pattern.fullmatch(name))}


def run(scenario: Path, slot: str, kind: str,
        faults: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    """The summary of ``scenario`` with ``kind`` in its ``slot``, and ``faults``."""
    return run_scenario(load_scenario(scenario, {slot: kind, **dict(faults)}),
                        seed=SEED).summary


@functools.cache
def fault_free(scenario: Path, slot: str, kind: str) -> dict[str, Any]:
    """``run`` without faults, kept: the fixed kinds' runs are shared."""
    return run(scenario, slot, kind)


def mutant_run(mutant: Mutant) -> Mapping[str, Any]:
    return fault_free(mutant.scenario_path, mutant.slot, mutant.kind)


def fixed_run(mutant: Mutant) -> Mapping[str, Any]:
    return fault_free(mutant.scenario_path, mutant.slot, mutant.derived_from)


@pytest.fixture(scope="module")
def mutants() -> Iterator[dict[str, Mutant]]:
    """The catalogue, each mutant's kind registered for this module's tests
    only: the registry is restored afterwards, so the rest of a session (the
    fields reference, ``stores``) sees no mutant."""
    with pytest.MonkeyPatch.context() as patch:
        for table in ("_REGISTERED", "_ORIGINS"):
            patch.setattr(registry, table, dict(getattr(registry, table)))
        yield {mutant.name: mutant for mutant in catalogue()}


def test_the_catalogue_has_a_dozen_mutants_in_lua_and_python_on_redis_and_in_memory(mutants):
    assert len(mutants) >= 12
    assert list(mutants) == list(CATALOGUE)
    assert {mutant.language for mutant in mutants.values()} == {"lua", "python"}
    kinds = [registry.get(mutant.kind) for mutant in mutants.values()]
    assert {backend for kind in kinds for backend in kind.backends} == {"redis", "memory"}
    for mutant, kind in zip(mutants.values(), kinds, strict=True):
        assert {damage.removeprefix("namespace_") for damage in mutant.damage} <= set(DAMAGE)
        assert kind.summary == mutant.breaks


@pytest.mark.parametrize("name", CATALOGUE)
def test_the_lab_detects_the_mutant(mutants, name):
    mutant = mutants[name]
    summary, fixed = mutant_run(mutant), fixed_run(mutant)
    for damage in mutant.damage:
        assert damage_total(summary, damage) > 0, f"{damage} not seen"
        assert damage_total(fixed, damage) == 0, f"the fixed store shows {damage} too"


@pytest.mark.parametrize("name", CATALOGUE)
def test_without_faults_the_mutants_damage_is_attributed_to_the_store(mutants, name):
    mutant = mutants[name]
    summary = mutant_run(mutant)
    shares = {damage: store_share(summary, damage) for damage in mutant.damage}
    assert all(share >= STORE_SHARE_AT_LEAST for share in shares.values()), shares


@pytest.mark.parametrize("name", CATALOGUE)
def test_the_fixed_store_has_no_damage_attributed_to_the_store(mutants, name):
    # Mutants sharing a fixed kind and a scenario share its run (fault_free).
    mutant = mutants[name]
    summary = fixed_run(mutant)
    for damage in mutant.damage:
        read(summary, metric_names(damage)[1])  # the attribution exists, so zero means zero
    assert blamed_on_the_store(summary) == {}


def blamed_on_the_store(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Every nonzero metric filed under ``store_logic`` (or a cause chained to it)."""
    return {name: value for name, value in summary.items() if STORE_LOGIC in name and value}


def test_colliding_ids_show_their_real_damage_and_no_phantom_leaks(mutants):
    # One replica's hold overwritten by another's under the same id, then
    # deleted by the first one's settlement: the store undercounts running
    # requests, but no hold outlives its request. The oracle must link holds
    # to requests by what it saw written, not by the store's ids.
    summary = mutant_run(mutants["ids_collide"])
    assert summary["wrongful_admissions"] > 0
    assert summary["holds_leaked"] == 0
    assert summary["leaked_hold_microdollar_seconds"] == 0


@pytest.mark.parametrize("name", ["settle_deletes_every_hold", "reclaims_live_holds"])
def test_a_hold_the_store_removes_before_its_deadline_is_no_expiry(mutants, name):
    # Only a hold gone at or after its deadline has expired; one a settlement
    # or a reclaim deleted sooner was the store's doing, and blaming the TTL
    # for it would send an engineer to tune the wrong thing.
    summary = mutant_run(mutants[name])
    assert summary["premature_expiries"] == 0
    assert summary["holds_removed_by_store"] > 0


# The mutants with a script of their own (known before any is registered).
LUA_MUTANTS = [name for name in CATALOGUE if (HERE / f"{name}.lua").exists()]


@pytest.mark.parametrize("name", LUA_MUTANTS)
def test_a_lua_mutant_does_the_same_on_a_real_server(mutants, name, redis_url):
    mutant = mutants[name]
    assert mutant.language == "lua"
    real = run_scenario(load_scenario(mutant.scenario_path, {mutant.slot: mutant.kind}),
                        seed=SEED, backend=redis_url).summary
    fake = mutant_run(mutant)
    assert {**real, "backend": None} == {**fake, "backend": None}


# With faults on. Each case injects one fault class, so the counterfactual
# mode's run without it is the store alone, and the fixed store under the
# same faults is the fault alone. When the two interact (a failover moves
# where the store's record meets the cap), "what goes away without the
# fault" and "what the bug adds to the fault" differ; the store's fair share
# is their mean over the damage with both (the Shapley value of two causes),
# clamped to [0, 1] since a fault can also hide some of the bug's damage
# (a crashed request never settles, so the mutant never forgets its hold). The cases are chosen
# so that the fault and the bug add their damage rather than need each other
# (docs/metrics.md, "When the two differ": a conjunction -- damage that only
# the two together make -- is wholly the store's mechanistically and wholly
# the fault's counterfactually, and no tolerance reconciles them), so the two
# shares must agree within TOLERANCE. The fixed store under the same faults
# has nothing filed under store_logic.
TOLERANCE = 0.15


class FaultedCase(NamedTuple):
    mutant: str
    damage: str
    faults: tuple[tuple[str, Any], ...]
    """Scenario overrides that inject the faults."""
    fault_class: str
    """The counterfactual mode's name for the class injected."""
    count: str
    """A summary count that shows the faults happened."""


FAULTED = {
    "settle_charges_twice-retried_settlements": FaultedCase(
        # The replies of three settlements per replica are lost and the driver
        # retries them: the retry's charge is the fault's, the doubling the
        # store's. The schedule aims at `settle_v1`, the mutant's own script
        # under the name of the one it replaces.
        "settle_charges_twice", "drift",
        (("network.retries", 2),
         ("faults.schedule", [{"at": "1s", "fault": "lose_reply", "replica": replica,
                               "call": "settle_v1", "count": 3} for replica in range(10)])),
        "scheduled lose_reply", "duplicate_execution_count"),
    "cap_check_off_by_one-failover": FaultedCase(
        # A failover to a replica 100 ms behind loses that much spend, which
        # the fleet spends again; the off-by-one admits one estimate more.
        "cap_check_off_by_one", "overshoot",
        (("faults.schedule", [{"at": "2s", "fault": "failover", "lag": "100ms",
                               "down_for": "50ms"}]),),
        "scheduled failover", "fault_failover_count"),
    "settle_forgets_hold-crashes": FaultedCase(
        # Crashed replicas leak the holds of the requests they abort; the
        # mutant leaks the holds of those that settle.
        "settle_forgets_hold", "leaks",
        (("faults.crash", {"rate": "6/min", "restart_after": "200ms"}),), "crash",
        "fault_crash_count"),
    "migration_drops_a_key-migration_killed": FaultedCase(
        # The migration is killed after its 20th command and run again: the
        # fixed one loses nothing that way, so the spend lost is the mutant's.
        "migration_drops_a_key", "drift",
        (("migrations.0.crash_after_commands", 20), ("migrations.0.rerun_after", "100ms")),
        "migration_crash", "fault_migration_killed_count"),
}


@pytest.mark.parametrize("case", FAULTED)
def test_with_faults_the_stores_share_is_near_the_counterfactual_figure(mutants, case):
    mutant_name, damage, faults, fault_class, count = FAULTED[case]
    mutant = mutants[mutant_name]
    result = counterfactual(
        load_scenario(mutant.scenario_path, {mutant.slot: mutant.kind, **dict(faults)}),
        seed=SEED)
    assert result.baseline[count] > 0
    (without_faults,) = (run.summary for run in result.runs
                         if run.fault_class.name == fault_class)
    with_faults = damage_total(result.baseline, damage)
    assert with_faults > 0
    fault_alone = damage_total(
        run(mutant.scenario_path, mutant.slot, mutant.derived_from, faults), damage)
    store_alone = damage_total(without_faults, damage)
    counterfactual_share = min(1.0, max(0.0, (store_alone + with_faults - fault_alone)
                                        / 2 / with_faults))
    mechanistic_share = store_share(result.baseline, damage)
    assert abs(mechanistic_share - counterfactual_share) <= TOLERANCE, (
        f"{damage}: mechanistic store share {mechanistic_share:.3f}, "
        f"counterfactual {counterfactual_share:.3f}, {parts(result.baseline, damage)}")


@pytest.mark.parametrize("case", FAULTED)
def test_with_faults_the_fixed_store_has_no_damage_attributed_to_the_store(mutants, case):
    mutant = mutants[FAULTED[case].mutant]
    summary = run(mutant.scenario_path, mutant.slot, mutant.derived_from, FAULTED[case].faults)
    assert summary[FAULTED[case].count] > 0
    assert blamed_on_the_store(summary) == {}


def test_the_metrics_doc_lists_every_mutant_with_the_metrics_that_catch_it(mutants):
    text = (SCENARIOS.parents[1] / "docs" / "metrics.md").read_text(encoding="utf-8")
    _, _, section = text.partition("## Mutants: how the oracle is tested")
    section = section.split("\n## ", 1)[0]  # up to the next section
    rows = {line.split("`")[1]: line for line in section.splitlines()
            if line.startswith("| `")}
    assert list(rows) == list(CATALOGUE)
    for name, mutant in mutants.items():
        for damage in mutant.damage:
            assert f"`{metric_names(damage)[0]}`" in rows[name], (name, damage)
