"""The lease family end to end: whole runs of the lease store, each fault
class blamed on itself, deliberately broken stores blamed on the store.

Each run is a small scenario (two subjects, a few replicas, ten seconds)
through ``run_scenario``, so the lifecycle, the server observer (whose
end-of-run check compares the oracle's books with the backend) and the
oracle are all exercised. The fixed store under one fault class must show
that class's cause and never ``store_logic``; a store whose script is
broken, with no fault at all, must show ``store_logic`` only.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from blame import blamed_on_the_lab, blamed_on_the_store
from scenario_data import merge

from simulator.engine.kernel import SimulationError
from simulator.families import family_of
from simulator.families.axond_leases.causes import DENIAL_CAUSES, EXCESS_CAUSES, LEAK_CAUSES
from simulator.families.axond_leases.observer import LeaseObserver
from simulator.families.axond_leases.oracle import LeaseOracle
from simulator.present.report import summary_table
from simulator.present.timeline import draw_timeline
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores import registry

BASE = {
    "name": "leases-small", "duration": "10s", "drain": "6s", "store": "axond_leases.redis",
    "store_settings": {"max_in_flight": 3, "lease_ttl": "5s", "timeout": "250ms"},
    "fleet": {"replicas": 4},
    "workload": {"arrivals": "poisson(20/s)", "keys": {"subjects": 2},
                 "duration": "exponential(200ms)"},
}
"""Two subjects, three slots each, about four requests in flight on each:
denials happen, nothing else does."""

BUSY = {"workload": {"arrivals": "poisson(60/s)"}}


def schedule(*faults: dict) -> dict:
    return {"faults": {"schedule": list(faults)}}


FAULTS = {
    "crash": (schedule({"at": "2s", "fault": "crash", "replica": 0, "restart_after": "1s"}),
              {"leaked_lease_seconds_by_crash", "false_denials_by_leaked_leases"}),
    "acquire_reply_lost": (schedule({"at": "2s", "fault": "lose_reply", "replica": 0,
                                     "call": "acquire"}),
                           {"leaked_lease_seconds_by_abandoned_acquire", "misaligned_replies"}),
    "release_request_lost": (schedule({"at": "2s", "fault": "lose_request", "replica": 0,
                                       "call": "release"}),
                             {"leaked_lease_seconds_by_release_lost"}),
    "server_down_for_releases": (
        merge(schedule({"at": "3s", "fault": "server_restart", "down_for": "3s"}),
              {"server": {"persistence": "aof-always"}}),
        {"leaked_lease_seconds_by_release_gave_up", "fail_closed_denials"}),
    "ttl_shorter_than_requests": ({"store_settings": {"lease_ttl": "150ms"}},
                                  {"concurrency_excess_lease_seconds_by_lease_expired_while_held",
                                   "leases_expired_while_held"}),
    "fail_open_while_down": (
        merge(schedule({"at": "3s", "fault": "server_restart", "down_for": "1s"}),
              {"store_settings": {"on_unavailable": "allow"},
               "server": {"persistence": "aof-always"}}),
        {"concurrency_excess_lease_seconds_by_fail_open", "requests_admitted_unenforced"}),
    "restart_losing_leases": (
        merge(BUSY, merge(schedule({"at": "3s", "fault": "server_restart", "down_for": "100ms"}),
                          {"server": {"persistence": "none"}})),
        {"concurrency_excess_lease_seconds_by_server_data_loss", "leases_lost_to_data_loss"}),
    "failover_bringing_leases_back": (
        merge(BUSY, schedule({"at": "3s", "fault": "failover", "lag": "1s",
                              "down_for": "100ms"})),
        {"leaked_lease_seconds_by_server_data_loss"}),
    "eviction": ({"workload": {"keys": {"subjects": 6}}, "server": {"maxmemory_keys": 3}},
                 {"concurrency_excess_lease_seconds_by_evicted", "leases_lost_to_evicted"}),
    # Clients that leave after 200 ms: one whose acquire is answered 300 ms
    # late is cancelled mid-acquire, and its lease is the store's to give back.
    "client_out_of_patience": (
        merge({"workload": {"patience": "200ms"}},
              schedule({"at": "2s", "fault": "slow_reply", "replica": 0, "call": "acquire",
                        "extra": "300ms"})),
        {"requests_cancelled", "leaked_lease_seconds_by_abandoned_acquire"}),
    # The operator lowers the limit under callers already holding, replica
    # by replica: old and new limits serve side by side meanwhile.
    "reconfigure": (
        merge(BUSY, schedule({"at": "3s", "fault": "reconfigure", "every": "200ms",
                              "settings": {"max_in_flight": 1, "lease_ttl": "3s"}})),
        {"concurrency_excess_lease_seconds_by_config_change"}),
}
"""Each fault class: its scenario change, and the metrics it must move."""

BROKEN_SCRIPTS = {
    "release_forgets": ("release", "return 1",
                        {"leaked_lease_seconds_by_store_logic", "false_denials_by_store_logic"}),
    "counts_one_short": ("acquire", None,
                         {"concurrency_excess_lease_seconds_by_store_logic"}),
}
"""Deliberately broken stores (a script replaced), run with no fault: each
must be blamed on ``store_logic`` for what it breaks. ``None``: the shipped
script with its limit check off by one."""


def run(change: dict, seed: int = 1, **options):
    return run_scenario(parse_scenario(merge(BASE, change)), seed=seed, **options)


@pytest.fixture(scope="module")
def broken_kinds(tmp_path_factory):
    """Kinds of the shipped lease store with one script broken, registered
    for this module only."""
    from stores.axond_leases import SCRIPTS, redis_kind

    folder = tmp_path_factory.mktemp("broken_lease_scripts")
    names = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
        for name, (script, text, _) in BROKEN_SCRIPTS.items():
            if text is None:
                text = SCRIPTS.source(script).replace("live >= max_in_flight",
                                                      "live > max_in_flight")
                assert "live > max_in_flight" in text
            path = Path(folder, f"{name}.lua")
            path.write_text(text)
            kind = redis_kind(f"lease_mutants.{name}", f"a broken {script} script",
                              scripts=SCRIPTS.replacing(**{script: path}))
            registry.register(kind)
            names[name] = kind.name
        yield names


@pytest.fixture(scope="module")
def summaries(broken_kinds) -> dict[str, dict]:
    """Every run of this module, by name: the fault-free one, one per fault
    class, one per broken store."""
    results = {"no_fault": run({}).summary}
    for name, (change, _) in FAULTS.items():
        results[name] = run(change).summary
    for name, kind in broken_kinds.items():
        results[name] = run({"store": kind}).summary
    return results


def test_a_fault_free_run_does_no_damage(summaries):
    summary = summaries["no_fault"]
    assert summary["requests_denied_exceeded"] > 0  # the limit was reached
    assert summary["requests_completed"] == summary["requests_admitted"]
    assert summary["concurrency_excess_lease_seconds"] == 0
    assert summary["leaked_lease_seconds"] == 0
    assert summary["false_denials"] == 0
    assert summary["requests_in_flight_peak"] <= 2 * 3  # two subjects, three slots each
    assert summary["convergence_after_faults_us"] == 0


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


def test_the_fixed_store_never_acts_on_another_commands_reply(summaries):
    assert summaries["acquire_reply_lost"]["misaligned_replies"] > 0
    assert all(summary["misaligned_results_accepted"] == 0
               for name, summary in summaries.items() if name not in BROKEN_SCRIPTS)


def test_every_lease_metric_moves_in_some_run(summaries):
    # What only a store that trusts a misaligned reply, or a driver retry
    # that recounts its own lease, can move is pinned by the oracle's unit
    # tests (test_lease_oracle.py) and by the variants' race reports; and
    # these runs drain past every lease's deadline.
    elsewhere = {"misaligned_results_accepted", "false_denials_by_duplicate_execution",
                 "requests_in_flight_at_end", "leases_still_leaked_at_end"}
    metrics = [name for name in summaries["no_fault"]
               if name.startswith(("requests_", "concurrency_", "leaked_", "leases_",
                                   "false_denials", "fail_closed", "misaligned_", "denial_"))]
    still = [name for name in metrics
             if name not in elsewhere and not any(summary[name] for summary in summaries.values())]
    assert still == []
    for causes, prefix in ((EXCESS_CAUSES, "concurrency_excess_lease_seconds_by_"),
                           (LEAK_CAUSES, "leaked_lease_seconds_by_"),
                           (DENIAL_CAUSES, "false_denials_by_")):
        assert {f"{prefix}{cause}" for cause in causes} <= set(summaries["no_fault"])


def test_the_same_seed_gives_the_same_lease_summary():
    change = FAULTS["crash"][0]
    assert run(change, seed=5).summary == run(change, seed=5).summary


def test_a_faulty_lease_run_gives_the_same_summary_on_fakeredis_and_real_redis(redis_url):
    change = merge(schedule({"at": "2s", "fault": "crash", "replica": 0, "restart_after": "1s"},
                            {"at": "4s", "fault": "dropped_waiter", "replica": 1}),
                   {"network": {"request_loss": 0.01, "reply_loss": 0.01}})
    fake = run(change, seed=3, backend="fakeredis").summary
    real = run(change, seed=3, backend=redis_url).summary
    assert {**fake, "backend": ""} == {**real, "backend": ""}
    assert fake["leaked_lease_seconds"] > 0


def test_the_summary_table_reads_as_the_lease_family(summaries):
    table = summary_table(summaries["crash"])
    for section in ("-- requests", "-- concurrency", "-- leases", "-- denials"):
        assert section in table
    assert "-- cap" not in table
    assert "leaked_lease_seconds_by_crash" in table


def test_the_timeline_draws_callers_holding_against_leases_counted(tmp_path):
    change = merge(FAULTS["crash"][0], {"metrics": {"sample_every": "100ms", "per_key": True}})
    scenario = parse_scenario(merge(BASE, change))
    result = run_scenario(scenario, seed=1)
    rows = result.sampler.rows
    assert any(row["leases_leaked"] for row in rows if row["subject"] != "*")
    lanes = family_of(registry.get("axond_leases.redis")).timeline
    assert lanes.strayed_keys(rows)  # the crash's key strays
    path = draw_timeline(result, tmp_path / "leases.png", schedule=change["faults"]["schedule"],
                         settings=scenario.settings)
    assert path.stat().st_size > 10_000


def test_a_lease_run_is_the_same_with_and_without_pipelining_and_at_any_sampling():
    # The lifecycle's facts wait behind queued commands (Family.oracle_facts);
    # were one missing, the oracle would judge a command after a later fact.
    change = merge(schedule({"at": "2s", "fault": "crash", "replica": 0, "restart_after": "1s"},
                            {"at": "4s", "fault": "dropped_waiter", "replica": 1},
                            {"at": "5s", "fault": "server_restart", "down_for": "300ms"}),
                   {"network": {"request_loss": 0.01, "reply_loss": 0.01},
                    "store_settings": {"lease_ttl": "400ms"}, "server": {"persistence": "rdb"},
                    "metrics": {"sample_every": "50ms", "per_key": True}})
    pipelined = run(change, seed=2)
    one_by_one = run(change, seed=2, pipelined=False)
    assert pipelined.summary == one_by_one.summary
    assert pipelined.sampler.rows == one_by_one.sampler.rows
    assert run(merge(change, {"metrics": {"sample_every": "1s"}}), seed=2).summary == (
        pipelined.summary)
    assert pipelined.summary["leaked_lease_seconds"] > 0
    assert pipelined.summary["concurrency_excess_lease_seconds"] > 0


def test_the_observer_follows_field_changes_and_stops_a_run_whose_books_differ_from_the_server():
    kind = registry.get("axond_leases.redis")
    books = LeaseOracle(max_in_flight=1)
    observer = LeaseObserver(books, [(kind, kind.settings_model())], [("ns", "alice")])
    (redis_key,) = observer.ledger_keys()
    observer.executed(([redis_key, "fields", ["a", "1767225601000", "b", "1767225602000"]],),
                      0, -1)
    observer.executed(([redis_key, "fields", ["a", None]],), 10, -1)
    assert set(books.books[("ns", "alice")].leases) == {"b"}

    def server(content):
        return SimpleNamespace(read_ledger_keys=lambda keys: dict.fromkeys(keys, content),
                               kernel=SimpleNamespace(seed=7))

    observer.check(server(["b", "1767225602000"]))  # the books are the server's
    with pytest.raises(SimulationError, match="seed 7"):
        observer.check(server(None))


def test_a_cancelled_caller_is_neither_admitted_nor_denied(summaries):
    summary = summaries["client_out_of_patience"]
    assert summary["requests_cancelled"] > 0
    assert summary["requests_arrived"] == (summary["requests_admitted"]
                                           + summary["requests_denied"]
                                           + summary["requests_cancelled"])
    assert summaries["no_fault"]["requests_cancelled"] == 0


def test_fail_closed_an_unwarranted_retirement_s_unavailable_answers_are_the_store_s():
    """Fail-closed, a reply 300 ms late: the variant whose invoke shares the
    caller's 250 ms retires the healthy connection and answers the callers
    behind it unavailable; with room under the limit, a sound store would
    have answered them, so the refusal is a false denial, the store's. The
    fixed store lets the invoke run on: its unavailable answers are the
    policy's alone."""
    from pathlib import Path

    from simulator.run.compose import run_scenario
    from simulator.scenario.model import load_scenario

    plain = (Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
             / "axond-leases.toml")
    slow = [{"at": "1ms", "fault": "slow_reply", "replica": 0, "count": 1, "extra": "300ms"}]

    def summary(store: str) -> dict:
        return run_scenario(load_scenario(plain, {"store": store,
                                                  "faults.schedule": slow})).summary

    fixed, variant = (summary("axond_leases.redis"),
                      summary("axond_leases.variants.invoke_shares_caller_timeout"))
    assert fixed["false_denials"] == 0 and fixed["fail_closed_denials"] > 0
    assert variant["false_denials_by_store_logic"] >= 1
    assert "no longer trusted" in variant["store_logic_began"]
    assert variant["false_denials_exposed_by"] == "slow_reply on acquire"
