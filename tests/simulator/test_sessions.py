"""Sessions: arrivals that are many calls over several counters, drawn whole and repeatably."""

from __future__ import annotations

import random

import pytest
from scenario_data import merge

from simulator.scenario.distributions import parse_distribution
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.scenario.sessions import WHOLE, Part, Sessions, plan_session
from simulator.world.requests import KeySpace, RequestSource

BASE = {"name": "sessions", "duration": "10s", "store": "axond_budget.redis_v1",
        "store_settings": {"subject_cap_microdollars": 1_000_000},
        "workload": {"arrivals": "poisson(5/s)", "keys": {"subjects": 3}}}


def source(workload_change: dict, seed: int = 4) -> RequestSource:
    scenario = parse_scenario(merge(BASE, {"workload": workload_change}))
    keys = scenario.workload.keys
    return RequestSource(scenario.workload, KeySpace(keys.namespaces, keys.subjects,
                                                     keys.zipf_exponent),
                         1, 0, random.Random(seed))


def test_a_session_is_a_plan_of_calls_over_every_counter_within_its_lifetime():
    settings = Sessions.model_validate({"lifetime": "1h", "call_every": "5m",
                                        "counters": {"tokens": {"amount": 40, "limit": 500},
                                                     "calls": {"limit": 10}}})
    plan = plan_session(settings, 12, "subject-1", random.Random(1))
    assert plan.prefix == "budget:{s12}:"
    assert plan.lifetime_us == 3_600_000_000 == plan.cleanup_at_us
    offsets = [call.offset_us for call in plan.calls]
    assert offsets == [300_000_000 * n for n in range(1, 12)]  # every 5 min before the hour
    assert all([(p.counter, p.amount, p.limit) for p in call.spends]
               == [("tokens", 40, 500), ("calls", 1, 10)] for call in plan.calls)
    assert plan.key("tokens") == "budget:{s12}:tokens"


def test_refunds_give_back_a_share_of_the_named_counters_exactly():
    settings = Sessions.model_validate({
        "lifetime": "1h", "call_every": "1m",
        "counters": {"tokens": {"amount": 2**62 + 7, "limit": 2**63 - 1},
                     "calls": {"limit": 100}},
        "refunds": {"chance": 1.0, "share": 0.25, "counters": ["tokens"]}})
    plan = plan_session(settings, 1, "subject-1", random.Random(2))
    refunds = {part.counter: part.amount for call in plan.calls for part in call.refunds}
    # Integer arithmetic: a float would round an amount this large.
    assert refunds == {"tokens": (2**62 + 7) // 4}


def test_sessions_of_one_subject_can_recycle_its_prefix():
    settings = Sessions.model_validate({"prefix_from": "subject"})
    first = plan_session(settings, 1, "subject-7", random.Random(1))
    second = plan_session(settings, 2, "subject-7", random.Random(1))
    assert first.prefix == second.prefix == "budget:{subject-7}:"


def test_the_same_seed_draws_the_same_sessions():
    change = {"sessions": {"lifetime": "lognormal(30m, 0.5)", "refunds": {"chance": 0.3}}}
    first = [source(change).next_request() for _ in range(5)]
    again = [source(change).next_request() for _ in range(5)]
    assert first == again
    assert all(request.session is not None and request.session.calls for request in first)


def test_a_workload_without_sessions_has_no_sessions():
    # It draws nothing for them either: every race report of the budget
    # family replays with its recorded fingerprint (tests/simulator/test_races.py).
    plain = source({})
    assert all(plain.next_request().session is None for _ in range(20))


@pytest.mark.parametrize(("sessions", "says"), [
    ({"counters": {}}, "at least one counter"),
    ({"refunds": {"chance": 0.5, "counters": ["tokenz"]}}, "tokenz"),
    ({"retries": -1}, "retries"),
    ({"prefix_from": "tenant"}, "prefix_from"),
    ({"tally": "tokens"}, "tally"),
    ({"refunds": {"whole": 1.5}}, "whole"),
    ({"lifetime": "48h", "call_every": "1ms"}, "lengthen call_every"),
    ({"call_every": "0s"}, "longer than 0"),
])
def test_a_wrong_sessions_table_is_refused_naming_the_field(sessions, says):
    with pytest.raises(ScenarioError, match=says):
        parse_scenario(merge(BASE, {"workload": {"sessions": sessions}}))


def test_a_session_drawn_with_absurdly_many_calls_is_refused_in_one_line():
    # Validation judges the means; a heavy tail can still draw a session
    # past the bound, which the draw refuses (here the bound is reached by
    # changing the gap after validation).
    settings = Sessions.model_validate({"lifetime": "48h"}).model_copy(
        update={"call_every": parse_distribution("1ms", "duration")})
    with pytest.raises(ValueError, match="more than 100,000 calls"):
        plan_session(settings, 1, "subject-1", random.Random(1))


def test_a_tally_adds_one_per_call_on_a_counter_of_its_own():
    settings = Sessions.model_validate({"lifetime": "1h", "call_every": "20m",
                                        "tally": "tool_calls"})
    plan = plan_session(settings, 3, "subject-1", random.Random(1))
    assert [call.tally for call in plan.calls] == [Part("tool_calls", 1, 0)] * 2
    assert all("tool_calls" not in {part.counter for part in call.spends} for call in plan.calls)


def test_whole_refunds_send_the_all_amount_per_counter_and_mix_with_shares():
    settings = Sessions.model_validate({
        "lifetime": "10h", "call_every": "1m",
        "counters": {"tokens": {"amount": 1000, "limit": 10**9},
                     "calls": {"amount": 2, "limit": 10**9}},
        "refunds": {"chance": 1.0, "share": 0.5, "whole": 0.5}})
    plan = plan_session(settings, 1, "subject-1", random.Random(5))
    amounts = [tuple(part.amount for part in call.refunds) for call in plan.calls]
    kinds = {tuple(amount == WHOLE for amount in call) for call in amounts}
    assert kinds == {(False, False), (False, True), (True, False), (True, True)}
    assert {amount for call in amounts for amount in call} == {500, 1, WHOLE}


def test_a_plan_without_tally_or_whole_refunds_draws_what_it_always_drew():
    """No draw for a feature left unset: older scenarios keep their sessions."""
    before = {"lifetime": "1h", "call_every": "exponential(5m)",
              "refunds": {"chance": 0.5}}
    plain = plan_session(Sessions.model_validate(before), 1, "s", random.Random(9))
    tallied = plan_session(Sessions.model_validate({**before, "tally": "n"}), 1, "s",
                           random.Random(9))
    assert [call.offset_us for call in plain.calls] == [call.offset_us for call in tallied.calls]
    assert [call.refunds for call in plain.calls] == [call.refunds for call in tallied.calls]
    assert all(call.tally is None for call in plain.calls)
