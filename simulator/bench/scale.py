"""The scale line of ``python -m simulator bench``: what a run of 10,000 replicas
with more than 100,000 requests in flight costs the lab.

The scenario is ``data/scenarios/bench-scale-10k.toml`` on the ``memory``
backend (the in-memory store), so that what is measured is the lab itself: the
kernel, the fleet, the oracle and the trace, not a Redis. It runs in a fresh
Python process, so that its peak RSS is the run's own (imports included, and
reported apart) and not whatever the bench did before it. ``--quick`` runs the
same scenario scaled down by overrides, and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulator.bench.lines import BenchLine
from simulator.run.limits import peak_resident_memory

SCENARIO = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "bench-scale-10k.toml"
RSS_BUDGET_MIB = 2 * 1024
"""The target: the full scenario under 2 GiB of peak RSS."""
IN_FLIGHT_TARGET = 100_000

QUICK_OVERRIDES: dict[str, Any] = {
    "fleet.replicas": 2_000,
    "workload.arrivals": "poisson(4000/s)",
    "workload.duration": "lognormal(5s, 0.2)",
    "duration": "8s",
    "drain": "12s",
}
"""A CI-sized run of the same scenario: 2,000 replicas, about 20,000 in flight."""

_CHILD = "from simulator.bench.scale import run_child; run_child()"


def run_child() -> None:
    """In the fresh process: run the scenario named on the command line and
    print what it cost, as JSON, on the last line of stdout."""
    from simulator.run.compose import run_scenario
    from simulator.scenario.model import load_scenario

    path, overrides = sys.argv[1], json.loads(sys.argv[2])
    scenario = load_scenario(path, overrides)
    rss_before_run_mib = _peak_rss_mib()
    result = run_scenario(scenario)
    summary, run_info = result.summary, result.run_info
    print(json.dumps({
        "replicas": summary["replicas"],
        "requests": summary["requests_arrived"],
        "in_flight_peak": summary["requests_in_flight_peak"],
        "virtual_seconds": summary["virtual_duration_us"] / 1e6,
        "wall_seconds": run_info["wall_seconds"],
        "kernel_events": run_info["kernel_events"],
        "peak_rss_mib": _peak_rss_mib(),
        "rss_before_run_mib": rss_before_run_mib,
    }))


def _peak_rss_mib() -> float:
    return peak_resident_memory() / 2**20


def run_in_fresh_process(overrides: dict[str, Any]) -> dict[str, Any]:
    """Run the scale scenario with ``overrides`` in a new interpreter."""
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, str(SCENARIO), json.dumps(overrides)],
        capture_output=True, text=True, check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"the scale run failed (exit {completed.returncode}):\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def measure_scale(quick: bool) -> BenchLine:
    """Peak RSS, wall time and virtual seconds per wall second of the scale run."""
    overrides = QUICK_OVERRIDES if quick else {}
    cost = run_in_fresh_process(overrides)
    virtual_per_wall = cost["virtual_seconds"] / cost["wall_seconds"]
    size = ("quick: scaled down from 10,000 replicas / 100,000 in flight, "
            if quick else "")
    short = "" if quick or cost["in_flight_peak"] >= IN_FLIGHT_TARGET else (
        f" (short of the {IN_FLIGHT_TARGET:,} aimed at)")
    figures = (
        f"{size}{cost['replicas']:,} replicas, {cost['in_flight_peak']:,} requests in flight "
        f"at peak{short}, {cost['requests']:,} requests, memory backend: "
        f"peak RSS {cost['peak_rss_mib']:,.0f} MiB ({cost['rss_before_run_mib']:,.0f} MiB "
        f"before the run), wall {cost['wall_seconds']:.1f} s, "
        f"{virtual_per_wall:.2f} virtual s per wall s, "
        f"{cost['kernel_events'] / cost['wall_seconds']:,.0f} kernel events/s"
    )
    return BenchLine("scale", figures, f"peak RSS / {RSS_BUDGET_MIB // 1024} GiB",
                     cost["peak_rss_mib"] / RSS_BUDGET_MIB, "<= 1")
