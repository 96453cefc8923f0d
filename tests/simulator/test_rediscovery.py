"""Rediscovery as a test of the lab: from one plain scenario per family, the
hunt finds every historical variant of the family with the same options
(``simulator.bench.rediscovery``; all of them: ``python -m simulator bench
--rediscovery``). Here: every plan is complete and sound, and the variants a
plan marks ``quick`` are found."""

from __future__ import annotations

import pytest

from simulator.bench.rediscovery import (
    SCHEDULE_BOUND,
    family_variants,
    fixed_kind,
    load_plan,
    plans,
    rediscover,
)
from simulator.cli import main
from simulator.scenario.model import load_scenario
from stores import registry

PLANS = plans()


def test_every_family_has_a_plan():
    assert sorted(plan.family for plan in PLANS) == sorted(registry.FAMILIES)


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.family)
def test_a_plan_names_every_variant_of_its_family_once_in_a_plain_scenario(plan):
    assert sorted(variant.kind for variant in plan.variants) == family_variants(plan.family)
    assert plan.schedules <= SCHEDULE_BOUND
    scenario = load_scenario(plan.scenario_path)
    assert scenario.name == plan.scenario_path.stem
    # Plain: no fault is scheduled; what breaks is for the hunt to find.
    assert not scenario.faults.schedule
    assert registry.get(scenario.store).name.split(".")[0] == plan.family
    for variant in plan.variants:
        fixed = fixed_kind(plan, variant)
        # The scenario names the fixed store where the variant goes, one that
        # takes the variant's settings (so it can stand in).
        assert ".variants." not in fixed
        assert (registry.get(fixed).settings_model
                is registry.get(variant.kind).settings_model), variant.kind
    assert any(variant.quick for variant in plan.variants)


QUICK = [pytest.param(plan, variant, id=variant.kind)
         for plan in PLANS for variant in plan.variants if variant.quick]


@pytest.mark.parametrize(("plan", "variant"), QUICK)
def test_the_hunt_finds_a_quick_variant_from_its_family_s_plain_scenario(plan, variant):
    found = rediscover(plan, variant)
    assert found.found, found.line
    assert found.schedules <= plan.schedules
    assert found.faults <= plan.max_faults


def test_a_plan_that_is_not_one_is_one_line(tmp_path):
    bad = tmp_path / "axond_leases.toml"
    bad.write_text('scenario = "x.toml"\nfaults = ["crash"]\nmax_faults = 3\nschedules = 4000\n'
                   "variants = []\n")
    with pytest.raises(ValueError, match=r"axond_leases.toml: not a rediscovery plan"):
        load_plan(bad)


def test_bench_rediscovery_of_an_unknown_family_is_refused(capsys):
    assert main(["bench", "--rediscovery", "nosuch"]) == 2
    error = capsys.readouterr().err.strip()
    assert "no plan for nosuch" in error and len(error.splitlines()) == 1
