"""The snapshots line of ``python -m simulator bench``: schedules a one-worker
hunt judges per minute when its runs branch from snapshots of the fault-free
run (``simulator.run.snapshots``) against the same hunt running each from
t = 0, on the committed plain hunt scenarios, and what the snapshots hold.

Each pair of hunts searches one scenario with the same seed for an invariant
no run breaks, so both try exactly the same schedules and none is shrunk;
only where each run starts differs. The hunts go turn about, scenario after
scenario, and the ratio is the median of the scenarios' own ratios (the
wall time of each search, from the baseline's end to the hunt's end, so
the trunk's walk to its snapshots, which overlaps the first runs, counts).
The memory is one ladder's: its processes' private pages (what they wrote
since they were forked) once the trunk has forked every snapshot.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from simulator.bench.hunt_speed import search_seconds
from simulator.bench.lines import BenchLine
from simulator.run.snapshots import SnapshotLadder
from simulator.scenario.model import load_scenario

HUNTS = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
PLAIN = ("axond-budget", "axond-leases", "av-state", "tollgate")
"""The committed plain hunt scenarios, one per family (nobody tuned them to a variant)."""
QUICK_SCHEDULES, FULL_SCHEDULES = 10, 60


def ladder_bytes(scenario: Path) -> tuple[int, int]:
    """One ladder of ``scenario``: its snapshots, and the bytes its processes
    hold of their own once the trunk has forked the last."""
    trunk = load_scenario(scenario)
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        last = len(ladder.instants) - 1
        ladder.run(trunk, last)  # answered once the trunk got there
        return len(ladder.instants), ladder.private_bytes()


def measure_snapshot_hunts(quick: bool) -> BenchLine:
    """Schedules per minute, branched against from t = 0, per plain scenario."""
    schedules = QUICK_SCHEDULES if quick else FULL_SCHEDULES
    ratios, parts = [], []
    for round_number, name in enumerate(PLAIN):
        path = HUNTS / f"{name}.toml"
        order = (True, False) if round_number % 2 == 0 else (False, True)
        seconds = {branching: search_seconds(schedules, scenario=path, branching=branching)
                   for branching in order}
        ratios.append(seconds[False] / seconds[True])
        snapshots, held = ladder_bytes(path)
        parts.append(f"{name} {60 * schedules / seconds[True]:,.0f} against "
                     f"{60 * schedules / seconds[False]:,.0f}/min, {snapshots} snapshots "
                     f"holding {held / 2**20:.0f} MiB")
    figures = (f"the same {schedules} schedules per scenario, one worker, branched against "
               f"from t = 0: " + "; ".join(parts))
    return BenchLine("hunt snapshots", figures, "branched / from t = 0 (median)",
                     statistics.median(ratios), ">= 3")
