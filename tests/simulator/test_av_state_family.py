"""The session-counter family end to end: whole runs of the av_state stores,
each fault class blamed on itself, broken stores blamed on the store, days
of virtual time with the 24 h counter TTL and the 5-minute marker TTL
expiring on both Redis backends, and the in-memory twin's divergence reported.

Each run is a small scenario through ``run_scenario``, so the lifecycle,
the observers (whose end-of-run check compares the oracle's books with the
backend) and the oracle are all exercised. The fixed store under one fault
class must show that class's causes and never ``store_logic``; a store whose
script is broken, with no fault at all, must show ``store_logic`` only.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from blame import blamed_on_the_lab, blamed_on_the_store
from scenario_data import merge

from simulator.engine.kernel import SimulationError
from simulator.families import family_of
from simulator.families.av_state.books import SERVER
from simulator.families.av_state.observer import CounterObserver
from simulator.families.av_state.oracle import CounterOracle
from simulator.present.report import summary_table
from simulator.present.timeline import draw_timeline
from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, parse_scenario
from stores import registry

SESSIONS = {"lifetime": "uniform(5m, 25m)", "call_every": "exponential(90s)",
            "call_duration": "lognormal(2s, 0.5)",
            "counters": {"tokens": {"amount": "uniform(100, 4000)", "limit": 30_000},
                         "total_calls": {"amount": 1, "limit": 12}},
            "refunds": {"chance": 0.5, "share": 0.5, "counters": ["tokens"]},
            "retries": 1, "retry_after": "1s"}

BASE = {
    "name": "sessions-small", "duration": "1h", "drain": "40m", "store": "av_state.redis",
    "fleet": {"replicas": 2},
    "workload": {"arrivals": "poisson(40/h)", "keys": {"subjects": 4}, "sessions": SESSIONS},
}
"""About forty sessions of a dozen calls: budgets are reached (calls are
refused), refunds given, every session's counters cleared at its end."""

SHARED = {"workload": {"sessions": {"prefix_from": "subject"}}}
"""Sessions of one subject recycle its prefix (and overlap)."""

LONG = {
    "name": "sessions-48h", "duration": "48h", "drain": "2h", "store": "av_state.redis",
    "fleet": {"replicas": 2},
    "workload": {"arrivals": "poisson(2/h)", "keys": {"subjects": 4}, "sessions": {
        "lifetime": "uniform(30h, 40h)", "call_every": "exponential(16h)",
        "counters": {"tokens": {"amount": "uniform(100, 4000)", "limit": 12_000},
                     "total_calls": {"amount": 1, "limit": 1}},
        "refunds": {"chance": 0.5, "share": 0.5, "counters": ["tokens"]}}},
}
"""Sessions of a day and a half, idle for hours between calls, some for
longer than the 24 h counter TTL, over 48 virtual hours."""

FAULTS = {
    "reply_loss": ({"network": {"reply_loss": 0.05}},
                   {"double_debits_by_reply_lost", "false_refusals_by_reply_lost"}),
    "driver_retries": ({"network": {"reply_loss": 0.05, "retries": {"count": 2}}},
                       {"double_debits_by_duplicate_execution",
                        "false_refusals_by_duplicate_execution"}),
    "restart_losing_counters": (
        {"faults": {"server_restart": {"rate": "2/h", "down_for": "2s"}},
         "server": {"persistence": "none"}},
        {"budget_overshoot_units_by_server_data_loss", "counter_resets_by_server_data_loss"}),
    "failover": ({"faults": {"failover": {"rate": "3/h", "lag": "60s"}}},
                 {"budget_overshoot_units_by_server_data_loss",
                  "counter_resets_by_server_data_loss"}),
    "eviction": ({"server": {"maxmemory_keys": 12}},
                 {"budget_overshoot_units_by_evicted", "counter_resets_by_evicted"}),
    "shared_prefixes": (SHARED, {"counter_resets_by_shared_prefix"}),
    "crash_with_shared_prefixes": (merge(SHARED, {"faults": {"crash": {"rate": "6/h"}}}),
                                   {"false_refusals_by_crash", "sessions_aborted_by_crash"}),
    "cleanup_lost": (merge(SHARED, {"network": {"request_loss": 0.1}}),
                     {"false_refusals_by_cleanup_lost"}),
    # One connection per replica, replies matched by order: a lost reply
    # hands the next caller (a spend, a cleanup's SCAN) another command's.
    "multiplexed_misaligned": ({"network": {"connection": "multiplexed", "reply_loss": 0.05}},
                               {"double_debits_by_reply_lost"}),
}
"""Each fault class (or race the workload decides): its scenario change, and
the metrics it must move."""

BROKEN_SCRIPTS = {
    "spends_one_past_the_limit": (
        "try_spend", ("amount > limit - current", "amount > limit - current + 1"),
        {"budget_overshoot_units_by_store_logic"}),
    "refunds_twice": (
        "refund_many", ("local new = redis.call('DECRBY', key, ARGV[i])",
                        "redis.call('DECRBY', key, ARGV[i])\n"
                        "        local new = redis.call('DECRBY', key, ARGV[i])"),
        {"budget_minted_units_by_store_logic"}),
}
"""Deliberately broken stores (one script edited), run with no fault: each
must be blamed on ``store_logic`` for what it breaks."""

VARIANTS = {
    "av_state.variants.refund_without_marker": (
        merge(FAULTS["driver_retries"][0], {"workload": {"sessions": {"refunds": {
            "chance": 1.0}}}}),
        # A re-sent refund credited twice: the store's (its marker makes it one-shot).
        {"budget_minted_units_by_store_logic"}),
    "av_state.variants.refund_not_exists_gated": (
        {"workload": {"sessions": {"refunds": {"chance": 1.0},
                                   "call_duration": "lognormal(60s, 0.5)"}}},
        {"counters_resurrected_by_store_logic", "counters_without_ttl_by_store_logic",
         "counters_resurrected_without_ttl"}),
    "av_state.variants.refund_many_tonumber": (
        {"workload": {"sessions": {"refunds": {"chance": 1.0, "whole": 0.3,
                                               "counters": ["tokens", "total_calls"]}}}},
        {"partial_batches_by_store_logic", "partial_refunds"}),
    "av_state.variants.add_without_ttl": (
        {"workload": {"sessions": {"tally": "tool_calls"}}},
        {"counters_without_ttl_by_store_logic"}),
    "av_state.variants.refusal_without_ttl_refresh": (
        # Sessions of more than a day, calling every hour or so, at their cap
        # within hours: refused for the rest, still calling.
        {"drain": "41h", "workload": {"arrivals": "poisson(8/h)", "sessions": {
            "lifetime": "uniform(30h, 40h)", "call_every": "exponential(1h)",
            "cleanup_after": "10m"}}},
        # A counter expiring under its calling session, and the cap spent again.
        {"counter_resets_by_store_logic", "budget_overshoot_units_by_store_logic"}),
    "av_state.variants.remove_prefix_noop": (
        # Sessions of a subject reuse its prefix: what a cleanup leaves, the
        # next one inherits, and is refused calls its budget had room for.
        SHARED, {"false_refusals_by_store_logic"}),
}
"""Historical variants (``stores.av_state.variants``): the scenario that shows
each one's damage, and the metrics it must move. The fixed store, same
scenario and seed, moves none of them."""

DAMAGE = ("budget_overshoot_units", "budget_minted_units", "double_debits", "false_refusals",
          "counters_resurrected", "counters_without_ttl", "partial_batches", "counter_resets")


TALLY_AND_WHOLE = {"workload": {"sessions": {
    "tally": "tool_calls",
    "refunds": {"chance": 0.8, "whole": 0.4, "counters": ["tokens", "total_calls"]}}}}
"""Every committed call counted with add, and refunds on both counters, some
of them whole (the "all" amount)."""

FAULTS_WITH_TALLIES = ("reply_loss", "driver_retries", "restart_losing_counters",
                       "crash_with_shared_prefixes", "cleanup_lost", "multiplexed_misaligned")
"""The fault classes the fixed store meets with tallies and whole refunds."""


def run(change: dict, seed: int = 1, base: dict = BASE, **options):
    return run_scenario(parse_scenario(merge(base, change)), seed=seed, **options)


@pytest.fixture(scope="module")
def broken_kinds():
    """Kinds of the shipped store with one script broken, registered for this module only."""
    from stores.av_state import SCRIPTS, redis_kind

    names = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
        for name, (script, (old, new), _) in BROKEN_SCRIPTS.items():
            text = SCRIPTS[script]
            assert old in text
            kind = redis_kind(f"counter_mutants.{name}", f"a broken {script} script",
                              scripts=SCRIPTS.replacing(**{script: text.replace(old, new)}))
            registry.register(kind)
            names[name] = kind.name
        yield names


@pytest.fixture(scope="module")
def summaries(broken_kinds) -> dict[str, dict]:
    """Every run of this module, by name: the fault-free one, one per fault
    class, one per broken store, each variant and the fixed store beside it."""
    results = {"no_fault": run({}).summary}
    for name, (change, _) in FAULTS.items():
        results[name] = run(change).summary
    for name, kind in broken_kinds.items():
        results[name] = run({"store": kind}).summary
    for kind, (change, _) in VARIANTS.items():
        results[kind] = run(merge(change, {"store": kind})).summary
        results[f"fixed beside {kind}"] = run(change).summary
    return results


def test_a_fault_free_run_does_no_damage(summaries):
    summary = summaries["no_fault"]
    assert all(summary[metric] == 0 for metric in DAMAGE), {m: summary[m] for m in DAMAGE}
    assert summary["calls_refused"] > 0  # budgets were reached
    assert summary["refunds_sent"] > 0 and summary["spend_attempts_retried"] > 0
    assert summary["cleanups_ended"] == summary["sessions_closed"] > 0


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_class_is_blamed_on_itself_and_never_on_the_store(summaries, name):
    summary = summaries[name]
    moved = {metric for metric in FAULTS[name][1] if summary[metric]}
    assert moved == FAULTS[name][1]
    assert blamed_on_the_store(summary) == {}


@pytest.mark.parametrize("name", sorted(BROKEN_SCRIPTS))
def test_a_broken_store_with_no_fault_is_blamed_on_its_own_logic(summaries, name):
    summary = summaries[name]
    expected = BROKEN_SCRIPTS[name][2]
    assert {metric for metric in expected if summary[metric]} == expected
    assert blamed_on_the_lab(summary) == {}


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_each_variant_does_its_damage_and_the_fixed_store_none_under_the_same_seed(summaries,
                                                                                   kind):
    expected = VARIANTS[kind][1]
    variant, fixed = summaries[kind], summaries[f"fixed beside {kind}"]
    assert {metric for metric in expected if variant[metric]} == expected
    assert all(fixed[metric] == 0 for metric in expected)


def test_the_fixed_store_blocks_every_replayed_refund_with_its_marker(summaries):
    fixed = summaries["fixed beside av_state.variants.refund_without_marker"]
    assert fixed["refund_replays_blocked"] > 0
    assert fixed["budget_minted_units"] == 0


def test_the_honest_store_is_never_blamed_whatever_the_lab_did(summaries):
    honest = ["no_fault", *FAULTS, *(f"fixed beside {kind}" for kind in VARIANTS)]
    assert {name: blamed_on_the_store(summaries[name]) for name in honest} == {
        name: {} for name in honest}


def test_days_of_virtual_time_expire_counters_and_markers_alike_on_fakeredis_and_real_redis(
        redis_url):
    fake = run({}, base=LONG, seed=2, backend="fakeredis")
    real = run({}, base=LONG, seed=2, backend=redis_url)
    assert {**fake.summary, "backend": ""} == {**real.summary, "backend": ""}
    summary = fake.summary
    # Markers (5 min) and idle counters (24 h) expired in virtual time: a
    # session idle for more than a day lost its counters and overspent.
    assert summary["key_expired_count"] > summary["counter_resets"] > 0
    assert summary["counter_resets"] == summary["counter_resets_by_counter_expired"]
    assert summary["budget_overshoot_units_by_counter_expired"] > 0
    assert summary["counters_kept_past_ttl"] == 0
    assert fake.run_info["wall_seconds"] < 60


def test_the_in_memory_twin_reports_the_counters_it_keeps_past_the_ttl():
    twin = run({"store": "av_state.in_memory"}, base=LONG, seed=2).summary
    redis = run({}, base=LONG, seed=2).summary
    # The same sessions: where Redis reset a counter idle for a day, the
    # twin kept it, and says so.
    assert twin["sessions_opened"] == redis["sessions_opened"]
    assert twin["counters_kept_past_ttl"] > 0 and twin["counter_hours_kept_past_ttl"] > 0
    assert twin["counters_without_ttl"] == twin["counters_without_ttl_by_in_memory_twin"] > 0
    assert twin["counter_resets"] == twin["budget_overshoot_units"] == 0
    assert twin["limit_enforced_per"] == "replica"


def test_a_counter_run_is_the_same_with_and_without_pipelining_and_at_any_sampling():
    # The lifecycle's facts wait behind queued commands (Family.oracle_facts);
    # were one missing, the oracle would judge a command after a later fact.
    change = merge(SHARED, {
        "network": {"reply_loss": 0.03, "request_loss": 0.02, "retries": {"count": 1}},
        "faults": {"crash": {"rate": "1/h"},
                   "server_restart": {"rate": "2/h", "down_for": "500ms"}},
        "server": {"persistence": "rdb"},
        "metrics": {"sample_every": "5s", "per_key": True}})
    pipelined = run(change, seed=3)
    one_by_one = run(change, seed=3, pipelined=False)
    assert pipelined.summary == one_by_one.summary
    assert pipelined.sampler.rows == one_by_one.sampler.rows
    assert run(merge(change, {"metrics": {"sample_every": "1m"}}), seed=3).summary == (
        pipelined.summary)
    assert pipelined.summary["double_debits"] > 0
    assert pipelined.summary["counter_resets"] > 0


def test_a_scenario_without_sessions_is_refused_naming_the_field():
    with pytest.raises(ScenarioError, match=r"^workload\.sessions: "):
        run_scenario(parse_scenario({"name": "no-sessions", "duration": "1s",
                                     "store": "av_state.redis"}))


def test_the_summary_table_reads_as_the_counter_family(summaries):
    table = summary_table(summaries["reply_loss"])
    for section in ("-- sessions", "-- budgets", "-- counters"):
        assert section in table
    assert "double_debits_by_reply_lost" in table
    assert "-- cap" not in table


def test_the_timeline_draws_the_counters_against_the_truth(tmp_path):
    change = merge(FAULTS["eviction"][0], {"metrics": {"sample_every": "30s", "per_key": True}})
    scenario = parse_scenario(merge(BASE, change))
    result = run_scenario(scenario, seed=1)
    rows = result.sampler.rows
    assert any(row["counter_record_units"] != row["counter_truth_units"]
               for row in rows if row["subject"] != "*")
    lanes = family_of(registry.get("av_state.redis")).timeline
    assert lanes.strayed_keys(rows)
    path = draw_timeline(result, tmp_path / "counters.png", settings=scenario.settings)
    assert path.stat().st_size > 10_000


def test_the_observer_stops_a_run_whose_books_differ_from_the_server():
    kind = registry.get("av_state.redis")
    books = CounterOracle(counter_ttl_us=86_400_000_000)
    observer = CounterObserver(books, [(kind, kind.settings_model(key_prefix="t"))], [])
    key = "t:budget:{s1}:tokens"
    books._ledger(SERVER, key)  # a session's counter
    observer.executed(((key, "string", "40"), ("t:budget:{s1}:tokens:r:1", "string", "1"),
                       ("elsewhere", "string", "9")), 0, -1)
    assert observer.ledger_keys() == [key, "t:budget:{s1}:tokens:r:1"]
    assert books.ledgers[SERVER, key].value == 40

    def server(held: dict) -> SimpleNamespace:
        return SimpleNamespace(kernel=SimpleNamespace(seed=7),
                               read_ledger_keys=lambda keys: {k: held.get(k) for k in keys})

    observer.check(server({key: "40", "t:budget:{s1}:tokens:r:1": "1"}))
    with pytest.raises(SimulationError, match="lab bug"):
        observer.check(server({key: "41", "t:budget:{s1}:tokens:r:1": "1"}))


@pytest.mark.parametrize("name", FAULTS_WITH_TALLIES)
def test_tallies_and_whole_refunds_under_faults_never_blame_the_fixed_store(name):
    summary = run(merge(FAULTS[name][0], TALLY_AND_WHOLE)).summary
    assert summary["tallies_added"] > 0 and summary["refunds_whole"] > 0
    assert blamed_on_the_store(summary) == {}
    # A whole refund empties the record and the truth alike: what it takes
    # back beyond its call's charge is a double debit closed, not minted.
    assert summary["budget_minted_units"] == 0
