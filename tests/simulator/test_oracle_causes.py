"""Each fault, alone, produces the metric it should and leaves the others at zero.

One small scenario per cause of cap overshoot (and per fault that causes no
overshoot but something else). A test names the cause it isolates, asserts
that the cause's metric moved, and asserts that every other overshoot cause,
and the metrics this fault cannot move, stayed at zero.
"""

from __future__ import annotations

import pytest
from scenario_data import merge

from simulator.families.axond_budget.causes import CAUSES
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

BASE = {
    "name": "cause", "duration": "6s", "drain": "4s", "store": "axond_budget.redis_v1",
    "store_settings": {"subject_cap_microdollars": 50_000, "reservation_ttl": "10s"},
    "fleet": {"replicas": 50},
    "network": {"latency": "lognormal(1ms, 0.3)", "timeout": "100ms"},
    "workload": {"arrivals": "poisson(500/s)", "keys": {"subjects": 10},
                 "estimate_microdollars": 1000, "actual_microdollars": "uniform(0, 1000)",
                 "duration": "lognormal(50ms, 0.5)"},
}


def summary_of(change: dict, seed: int = 1) -> dict:
    return run_scenario(parse_scenario(merge(BASE, change)), seed=seed).summary


def overshoot_causes(summary: dict) -> dict[str, int]:
    # A subject scope is always enforced: it reports no scope_not_enforced.
    return {cause: summary.get(f"cap_overshoot_by_{cause}_microdollars", 0) for cause in CAUSES
            if summary.get(f"cap_overshoot_by_{cause}_microdollars")}


def every_replica(fault: str, at: str, call: str, count: int) -> list[dict]:
    return [{"at": at, "fault": fault, "replica": replica, "call": call, "count": count}
            for replica in range(50)]


def test_without_faults_only_an_estimate_underrun_can_overshoot():
    summary = summary_of({"workload": {"actual_microdollars": "uniform(0, 1500)"}})
    assert set(overshoot_causes(summary)) == {"estimate_underrun"}
    assert summary["cap_overshoot_microdollars_total"] > 0
    assert summary["conservation_drift_microdollars_total"] == 0
    assert summary["holds_leaked"] == 0
    assert summary["wrongful_admissions"] == 0


def test_a_ttl_shorter_than_the_requests_overshoots_by_premature_expiry():
    summary = summary_of({"store_settings": {"reservation_ttl": "100ms"},
                          "workload": {"duration": "lognormal(300ms, 0.5)"}})
    assert set(overshoot_causes(summary)) == {"hold_expired_while_running"}
    assert summary["premature_expiries"] > 0
    assert summary["conservation_drift_microdollars_total"] == 0  # late settlements still land
    assert summary["holds_leaked"] == 0


def test_lost_settlements_undercount_and_overshoot_by_settlement_lost():
    summary = summary_of({
        "store_settings": {"reservation_ttl": "300ms"},
        "faults": {"schedule": every_replica("lose_request", "500ms", "settle_v1", 3)
                   + every_replica("lose_request", "1500ms", "settle_v1", 3)},
    })
    assert set(overshoot_causes(summary)) == {"settlement_lost"}
    assert summary["conservation_drift_microdollars_total"] < 0
    assert summary["conservation_overcount_microdollars_total"] == 0
    assert summary["premature_expiries"] == 0


def test_a_restart_without_persistence_overshoots_by_server_data_loss():
    summary = summary_of({
        "server": {"persistence": "none"},
        "faults": {"schedule": [{"at": "3s", "fault": "server_restart", "down_for": "50ms"}]},
    })
    assert set(overshoot_causes(summary)) == {"server_data_loss"}
    assert summary["conservation_drift_microdollars_total"] < 0
    assert summary["fault_server_restart_count"] == 1


def test_a_failover_to_a_lagging_replica_loses_the_lag_window():
    summary = summary_of({"faults": {"schedule": [
        {"at": "3s", "fault": "failover", "lag": "1s", "down_for": "50ms"}]}})
    assert set(overshoot_causes(summary)) == {"server_data_loss"}
    assert summary["conservation_drift_microdollars_total"] < 0


def test_a_restart_with_aof_always_loses_nothing():
    summary = summary_of({
        "server": {"persistence": "aof-always"},
        "faults": {"schedule": [{"at": "3s", "fault": "server_restart", "down_for": "0s"}]},
    })
    assert overshoot_causes(summary) == {}
    assert summary["spend_lost_to_data_loss_microdollars"] == 0
    assert summary["conservation_drift_microdollars_total"] == 0
    # The script cache is not persisted: after the restart the next EVALSHA
    # of each script meets NOSCRIPT again, as the first ones did at boot.
    assert summary["noscript_replies_count"] >= 2 * summary_of({})["noscript_replies_count"]


def test_fail_open_while_the_server_is_down_overshoots_by_fail_open_admission():
    summary = summary_of({
        "store_settings": {"on_unavailable": "allow"},
        "server": {"persistence": "aof-always"},
        "faults": {"schedule": [{"at": "1s", "fault": "server_restart", "down_for": "1s"}]},
    })
    assert set(overshoot_causes(summary)) == {"fail_open_admission"}
    assert summary["requests_admitted_unenforced"] > 0
    assert summary["requests_denied_store_unavailable"] == 0


def test_fail_closed_while_the_server_is_down_denies_and_keeps_the_cap():
    summary = summary_of({
        "server": {"persistence": "aof-always"},
        "faults": {"schedule": [{"at": "1s", "fault": "server_restart", "down_for": "1s"}]},
    })
    assert overshoot_causes(summary) == {}
    assert summary["fail_closed_denials"] > 0
    assert summary["false_denials_store_unavailable"] > 0


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
def test_eviction_of_spend_counters_overshoots_by_eviction(policy):
    summary = summary_of({"server": {"maxmemory_keys": 12, "eviction_policy": policy}})
    assert set(overshoot_causes(summary)) == {"eviction"}
    assert summary["key_evicted_count"] > 0
    assert summary["conservation_drift_microdollars_total"] < 0


def test_volatile_ttl_eviction_takes_only_keys_with_a_ttl_the_holds():
    summary = summary_of({"server": {"maxmemory_keys": 12, "eviction_policy": "volatile-ttl"},
                          "workload": {"duration": "lognormal(300ms, 0.5)"}})
    assert summary["key_evicted_count"] > 0
    assert summary["holds_lost_to_eviction"] > 0
    # Spend counters carry no TTL, so no settled spend is evicted.
    assert summary["spend_lost_to_eviction_microdollars"] == 0
    assert summary["conservation_drift_microdollars_total"] == 0


def test_reply_loss_on_reserve_alone_leaks_holds_but_keeps_the_books():
    summary = summary_of({"store_settings": {"reservation_ttl": "500ms"},
                          "faults": {"schedule": every_replica("lose_reply", "1s",
                                                               "reserve_v1", 2)}})
    assert summary["holds_leaked"] > 0
    assert summary["leaked_hold_microdollar_seconds"] > 0
    assert summary["false_denials"] > 0
    assert summary["conservation_drift_microdollars_total"] == 0
    assert overshoot_causes(summary) == {}


def test_a_retried_settlement_whose_reply_was_lost_charges_twice():
    summary = summary_of({"network": {"retries": 2},
                          "faults": {"schedule": every_replica("lose_reply", "1s",
                                                               "settle_v1", 1)}})
    assert summary["duplicate_settlements_executed"] > 0
    assert summary["duplicate_execution_count"] > 0
    assert summary["conservation_overcount_microdollars_total"] > 0
    assert summary["conservation_undercount_microdollars_total"] == 0
    assert overshoot_causes(summary) == {}


def test_crashed_replicas_abort_their_requests_and_leak_their_holds():
    summary = summary_of({"faults": {"schedule": [
        {"at": f"{1000 + index * 37}ms", "fault": "crash", "replica": index,
         "restart_after": "500ms"} for index in range(20)]}})
    assert summary["requests_aborted_by_crash"] > 0
    assert summary["holds_leaked"] > 0
    assert summary["replica_restarted_count"] == 20
    assert summary["conservation_drift_microdollars_total"] == 0
    assert overshoot_causes(summary) == {}


def test_a_pause_longer_than_the_ttl_expires_holds_of_running_requests():
    summary = summary_of({"store_settings": {"reservation_ttl": "200ms"}, "faults": {
        "schedule": [{"at": f"{1000 + index * 50}ms", "fault": "pause", "replica": index,
                      "duration": "500ms"} for index in range(20)]}})
    assert summary["premature_expiries"] > 0
    assert set(overshoot_causes(summary)) <= {"hold_expired_while_running"}
    assert summary["conservation_drift_microdollars_total"] == 0


def test_a_partition_times_out_calls_and_denies_fail_closed():
    summary = summary_of({"faults": {"schedule": [
        {"at": "2s", "fault": "partition", "replicas": list(range(10)), "duration": "1s"}]}})
    assert summary["fault_partition_count"] == 10
    assert summary["fail_closed_denials"] > 0
    assert summary["request_lost_count"] > 0
    assert overshoot_causes(summary) == {}


def test_per_replica_ledgers_overshoot_the_fleet_cap_by_per_replica_ledger():
    summary = summary_of({"store": "axond_budget.in_memory",
                          "store_settings": {"subject_cap_microdollars": 50_000}})
    assert set(overshoot_causes(summary)) == {"per_replica_ledger"}
    # Fifty replicas each spending up to the cap: far past one cap, never past fifty.
    assert 1 < summary["cap_overshoot_max_ratio"] < 50


@pytest.mark.parametrize("seed", [1, 2])
def test_leaked_holds_stop_counting_within_the_ttl_once_faults_stop(seed):
    summary = summary_of({"store_settings": {"reservation_ttl": "1s"}, "drain": "3s",
                          "network": {"reply_loss": 0.02}, "faults": {"until": "3s"}},
                         seed=seed)
    assert summary["holds_leaked"] > 0
    assert summary["holds_still_leaked_at_end"] == 0
    assert 0 <= summary["convergence_after_faults_us"] <= 1_000_000
