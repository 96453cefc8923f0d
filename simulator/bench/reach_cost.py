"""The reach line of ``python -m simulator bench``: what a run asked for its
reach (``simulator.reach``: every hunt's run by default, ``run --coverage``)
costs against the same run without, on each family's plain hunt scenario.

Both runs of a pair are the same run (a test checks the fingerprint is the
same); the pairs go turn about, and each family's figure is the median of
its pairs' ratios (a slow spell of a shared machine mostly falls on both
runs of a pair). The line's ratio is the median of the families'. What it
costs is the replay of the server's log on fakeredis for the Lua, and the
marks in the store's methods for the Python (``docs/speed.md``, issue 40).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from simulator.bench.lines import BenchLine

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
PLAIN = ("axond-budget", "axond-leases", "av-state", "tollgate")
QUICK_PAIRS, FULL_PAIRS = 1, 3
QUICK = {"duration": "1s", "drain": "1s"}


def _seconds(scenario, coverage: bool) -> float:
    from simulator.run.compose import run_scenario

    started = time.perf_counter()
    run_scenario(scenario, coverage=coverage)
    return time.perf_counter() - started


def measure_reach_cost(quick: bool) -> BenchLine:
    """A run with its reach against the same run without, per plain scenario."""
    from simulator.scenario.model import load_scenario

    pairs = QUICK_PAIRS if quick else FULL_PAIRS
    figures, ratios = [], []
    for name in PLAIN:
        scenario = load_scenario(HUNTS / f"{name}.toml", QUICK if quick else None)
        for coverage in (False, True):  # the engine's server, imports, marked methods: once
            _seconds(scenario, coverage)
        own = []
        for pair in range(pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            seconds = {coverage: _seconds(scenario, coverage) for coverage in order}
            own.append(seconds[True] / seconds[False])
        ratios.append(statistics.median(own))
        figures.append(f"{name} {ratios[-1]:.2f}x")
    return BenchLine("reach", f"a run recording its reach against the same run without, "
                              f"{pairs} pair(s) each: " + ", ".join(figures),
                     "with / without (median)", statistics.median(ratios),
                     "printed (the cost of a hunt's reach)")
