"""The engines line of ``python -m simulator bench``: schedules a one-worker
hunt judges per minute on each plain hunt scenario, on the lab's Valkey
engine (the default) against the same hunt on the embedded fakeredis.

Each pair of hunts searches one scenario with the same seed for an invariant
no run breaks, so both try exactly the same schedules and none is shrunk;
only the engine under the runs differs (``tests/simulator/test_hunt_engines``
checks that they judge every schedule the same). The hunts go turn about,
scenario after scenario, timed from the baseline's end to the hunt's end (so
the engine's server start, once per process, is not a schedule's cost). The
ledger family runs on its in-process ledger, not on Redis: its hunt is the
same on both and is measured once, for the figure. The ratio is the median
of the Redis families' own ratios.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from simulator.backends.engine import ENGINE, engine_binary
from simulator.bench.hunt_speed import search_seconds
from simulator.bench.lines import BenchLine

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
REDIS_PLAIN = ("axond-budget", "axond-leases", "av-state")
"""The plain hunt scenarios of the Redis families (nobody tuned them to a variant)."""
LEDGER_PLAIN = "tollgate"
QUICK_SCHEDULES, FULL_SCHEDULES = 4, 60


def measure_hunt_engines(quick: bool) -> BenchLine | str:
    """Schedules per minute on the engine and on fakeredis, per plain scenario."""
    if engine_binary() is None:
        return "hunt engines: skipped (the Valkey engine is not installed here)"
    schedules = QUICK_SCHEDULES if quick else FULL_SCHEDULES
    ratios, parts = [], []
    for round_number, name in enumerate(REDIS_PLAIN):
        order = (ENGINE, "fakeredis") if round_number % 2 == 0 else ("fakeredis", ENGINE)
        seconds = {backend: search_seconds(schedules, 1, HUNTS / f"{name}.toml",
                                           {"backend": backend})
                   for backend in order}
        ratios.append(seconds["fakeredis"] / seconds[ENGINE])
        parts.append(f"{name} {60 * schedules / seconds[ENGINE]:,.0f} against "
                     f"{60 * schedules / seconds['fakeredis']:,.0f}/min")
    ledger = search_seconds(schedules, 1, HUNTS / f"{LEDGER_PLAIN}.toml")
    parts.append(f"{LEDGER_PLAIN} (its in-process ledger, no Redis) "
                 f"{60 * schedules / ledger:,.0f}/min")
    figures = (f"the same {schedules} schedules per scenario, one worker, on the Valkey "
               f"engine against fakeredis: " + "; ".join(parts))
    return BenchLine("hunt engines", figures, "Valkey / fakeredis (median)",
                     statistics.median(ratios), ">= 2 against issue 39's fakeredis figures")
