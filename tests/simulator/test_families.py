"""A store kind finds its family by the protocol it speaks; a plugin may
bring a family of its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator import families
from simulator.families import family_of, invariants_for, register_family
from simulator.present.report import summary_table
from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, parse_scenario
from stores import registry

SMALL = {
    "name": "small", "duration": "1s", "drain": "1s",
    "store": "axond_budget.in_memory",
    "fleet": {"replicas": 2},
    "workload": {"arrivals": "poisson(50/s)", "keys": {"subjects": 3}},
}


@pytest.fixture
def plugin_kinds(monkeypatch):
    """Kinds and families registered by a test are forgotten after it."""
    monkeypatch.setattr(registry, "_REGISTERED", {})
    monkeypatch.setattr(families, "_REGISTERED", {})


def test_a_kind_renamed_by_a_plugin_keeps_the_family_of_the_kind_it_came_from(plugin_kinds):
    shipped = registry.get("axond_budget.redis_v1")
    renamed = replace(shipped, name="elsewhere.my_variant")
    assert family_of(renamed) is family_of(shipped)
    assert invariants_for(renamed) == invariants_for(shipped)
    assert set(family_of(shipped).invariants) <= set(invariants_for(renamed))


def test_a_store_speaking_a_protocol_no_family_handles_is_a_store_error(plugin_kinds):
    registry.register(replace(registry.get("axond_budget.in_memory"), name="elsewhere.tokens",
                              protocol="tokens"))
    with pytest.raises(ScenarioError, match="store: .*protocol 'tokens'"):
        run_scenario(parse_scenario({**SMALL, "store": "elsewhere.tokens"}))


def test_a_plugin_family_serves_its_kinds_and_lays_out_their_summary(plugin_kinds):
    budget = family_of(registry.get("axond_budget.in_memory"))
    served = []

    async def serve(replica, store, request):
        served.append(request.number)
        replica.finished(request.number)

    register_family(replace(budget, name="counting", protocol="counting", serve=serve,
                            summary=replace(budget.summary, sections=(("counted", ()),))))
    registry.register(replace(registry.get("axond_budget.in_memory"), name="elsewhere.counting",
                              protocol="counting"))
    result = run_scenario(parse_scenario({**SMALL, "store": "elsewhere.counting"}))
    assert served and result.summary["requests_arrived"] == 0  # its lifecycle, not the budget's
    assert "-- counted" in summary_table(result.summary)
    assert "-- cap" not in summary_table(result.summary)


def test_a_second_family_for_a_protocol_already_spoken_is_refused(plugin_kinds):
    budget = family_of(registry.get("axond_budget.redis_v1"))
    with pytest.raises(ValueError, match="already registered"):
        register_family(replace(budget, name="impostor"))
