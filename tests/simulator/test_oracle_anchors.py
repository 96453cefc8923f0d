"""Sanity anchors: with no faults the oracle must find nothing, and it must
reproduce what queueing theory says about holds."""

from __future__ import annotations

import math

from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario


def test_without_faults_the_store_keeps_cap_books_and_holds_at_fleet_scale():
    summary = run_scenario(parse_scenario({
        "name": "clean-fleet", "duration": "10s", "drain": "3s",
        "store": "axond_budget.redis_v1",
        "store_settings": {"subject_cap_microdollars": 150_000, "reservation_ttl": "1m"},
        "fleet": {"replicas": 300},
        "network": {"latency": "lognormal(1ms, 0.5)", "timeout": "1s"},
        "workload": {"arrivals": "poisson(2000/s)",
                     "keys": {"subjects": 100, "namespaces": 4, "skew": "zipf(1.1)"},
                     "estimate_microdollars": 2000, "actual_microdollars": "uniform(0, 2000)",
                     "duration": "lognormal(200ms, 0.8)"},
    }), seed=7).summary
    assert summary["requests_arrived"] > 19_000
    assert summary["requests_denied_exceeded"] > 1_000  # the caps bind
    assert summary["cap_overshoot_microdollars_total"] == 0
    assert summary["conservation_drift_microdollars_total"] == 0
    assert summary["holds_leaked"] == 0
    assert summary["premature_expiries"] == 0
    assert summary["wrongful_admissions"] == 0
    assert summary["false_denials"] == 0


def test_the_time_averaged_live_holds_obey_littles_law():
    """L = lambda * W for the holds: arrivals at lambda = 500/s, all admitted,
    each hold living from its reserve's execution to its settlement's, i.e.
    one reply latency + the request's duration + one request latency.

    Tolerance: the occupancy of an M/G/inf system with near-exponential
    holding times (mean W) is Poisson with mean m = lambda * W and
    autocorrelation exp(-tau / W), so its time average over a window T has
    variance about 2 m W / T. The test allows four standard deviations.
    """
    rate, duration_s, latency_median_s, sigma = 500.0, 0.2, 0.001, 0.3
    result = run_scenario(parse_scenario({
        "name": "little", "duration": "20s", "drain": "2s", "store": "axond_budget.redis_v1",
        "store_settings": {"subject_cap_microdollars": 10**12, "reservation_ttl": "1h"},
        "fleet": {"replicas": 20},
        "network": {"latency": f"lognormal({latency_median_s * 1000:g}ms, {sigma})"},
        "workload": {"arrivals": f"poisson({rate:g}/s)", "keys": {"subjects": 5},
                     "estimate_microdollars": 1000, "actual_microdollars": 1000,
                     "duration": f"exponential({duration_s * 1000:g}ms)"},
        "metrics": {"sample_every": "10ms"},
    }), seed=3)
    mean_latency_s = latency_median_s * math.exp(sigma**2 / 2)
    hold_time_s = duration_s + 2 * mean_latency_s
    expected = rate * hold_time_s
    window_start_us, window_end_us = 2_000_000, 18_000_000
    samples = [row["holds_live_microdollars"] / 1000 for row in result.sampler.rows
               if row["namespace"] == "*" and window_start_us <= row["time_us"] < window_end_us]
    measured = sum(samples) / len(samples)
    window_s = (window_end_us - window_start_us) / 1e6
    standard_error = math.sqrt(2 * expected * hold_time_s / window_s)
    assert result.summary["requests_denied"] == 0
    assert abs(measured - expected) <= 4 * standard_error, (measured, expected, standard_error)
