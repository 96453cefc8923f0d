"""The Erlang-B anchor: with no faults, a lease limiter refuses requests at the Erlang-B rate.

``max_in_flight = c`` slots, Poisson arrivals, offered load ``A`` Erlangs
(arrival rate × mean duration), refused requests lost (no queue): the share
refused is ``B(c, A)`` whatever the shape of the duration. Each point runs
the shipped lease store on fakeredis, once with exponential and once with
lognormal durations, and the denial share must lie within three standard
errors of ``B(c, A)``.

How the runs are made to fit the model: the lease TTL is far above every
duration (nothing expires under a running request), the caller's timeout is
generous (nothing times out), and the mean duration is a second, so the lease
a request holds (from its acquire on the server to its release landing, a
millisecond or so longer than its work) adds about 0.1 % to the offered load.

The standard error is taken by **batch means**, not the binomial
``sqrt(B(1 - B) / n)``: denials come in clusters (once the slots fill they
stay full for about a holding time), so the binomial understates one run's
uncertainty (about twice over here, measured over seeds). The run's requests,
in arrival order, are cut into ``BATCHES`` consecutive batches, each spanning
ten or more holding times, so their denial shares are nearly independent;
the standard error is their standard deviation over ``sqrt(BATCHES)``.
"""

from __future__ import annotations

import math
import statistics

import pytest

from simulator.analysis.leases import erlang_b, offered_erlangs_of
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

POINTS = [(20, 15.0), (5, 3.0), (10, 8.0)]
"""``(max_in_flight, offered Erlangs)``: the issue's point, B ≈ 0.0456, and two others."""

DURATIONS = {"exponential": ("exponential(1s)", 1.0),
             "lognormal": ("lognormal(1s, 0.8)", math.exp(0.8**2 / 2))}
"""Each shape, and its mean in seconds (a lognormal's is its median × exp(σ²/2))."""

ARRIVALS = 4_000
"""Requests per run, about: enough for a standard error near a tenth of B."""

BATCHES = 20


def scenario(slots: int, erlangs: float, duration: str, mean_seconds: float):
    rate = erlangs / mean_seconds
    return parse_scenario({
        "name": f"erlang-b-{slots}-{erlangs:g}", "duration": f"{round(ARRIVALS / rate)}s",
        "drain": "30s", "store": "axond_leases.redis",
        "store_settings": {"max_in_flight": slots, "lease_ttl": "1h", "timeout": "5s"},
        "fleet": {"replicas": 2},
        "metrics": {"sample_every": "0s"},
        "workload": {"arrivals": f"poisson({rate:.6f}/s)", "keys": {"subjects": 1},
                     "duration": duration},
    })


def denials_in_arrival_order(trace) -> list[int]:
    """1 for each request refused, 0 for each admitted, in the order they arrived."""
    columns = trace.columns
    arrived, refused = [], set()
    for kind, request in zip(columns["kind"], columns["request"], strict=True):
        if kind == "request_arrived":
            arrived.append(request)
        elif kind == "request_denied":
            refused.add(request)
    return [int(request in refused) for request in arrived]


def batch_means_standard_error(flags: list[int], batches: int = BATCHES) -> float:
    size = len(flags) // batches
    means = [sum(flags[index * size:(index + 1) * size]) / size for index in range(batches)]
    return statistics.stdev(means) / math.sqrt(batches)


@pytest.mark.parametrize("shape", sorted(DURATIONS))
@pytest.mark.parametrize(("slots", "erlangs"), POINTS)
def test_the_denial_share_with_no_faults_is_the_erlang_b_blocking(slots, erlangs, shape):
    duration, mean_seconds = DURATIONS[shape]
    run = scenario(slots, erlangs, duration, mean_seconds)
    offered = offered_erlangs_of(run)
    assert offered == pytest.approx(erlangs, rel=1e-6)
    result = run_scenario(run, seed=1)
    summary = result.summary
    expected = erlang_b(slots, offered)
    flags = denials_in_arrival_order(result.trace)
    assert len(flags) == summary["requests_arrived"]
    assert summary["requests_denied"] == sum(flags)
    # Every refusal is the limit's: none failed closed, none was false.
    assert summary["requests_denied_exceeded"] == summary["requests_denied"]
    assert summary["false_denials"] == 0
    assert summary["concurrency_excess_lease_seconds"] == 0
    standard_error = batch_means_standard_error(flags)
    assert 0 < standard_error < expected / 3  # precise enough to tell B from its neighbours
    assert abs(summary["denial_share"] - expected) <= 3 * standard_error, (
        f"denial share {summary['denial_share']:.4f} against B({slots}, {offered:g}) = "
        f"{expected:.4f}, standard error {standard_error:.4f}")
