"""The hunt line of ``python -m simulator bench``: schedules a hunt tries per
minute with one worker and with two, measured side by side.

Both hunts search the same committed quiet scenario with the same seed, for an
invariant no run can break (``requests_arrived < 0``), so each tries exactly
the same schedules, ``examples`` of them, and none is shrunk: the work is the
same and only the workers differ (``simulator.search.batches``). What is timed
is the search, in wall time: from the baseline run's end to the hunt's end,
so each hunt's own start of its workers counts where the baseline does not
hide it. What a process pays once, the forkserver importing the lab for
every worker it will fork (about a second), is paid before the clock starts
and printed apart: a schedules-per-minute figure is what a hunt of minutes
sees. The hunts go turn about, round after round, and the ratio is the median
of the rounds' own ratios (a slow spell of a shared machine mostly falls on
both hunts of a round; ``simulator.bench.kernel`` says why). The target, 1.7,
is what two cores can give once the driver's drawing (Hypothesis's, a few
milliseconds a schedule) and the workers' first runs are paid.

Two cores the machine shares may not both be free: each round also measures
what two workers busy with a plain Python loop get done together against one
alone (2.0 on two idle cores, 1.0 when the others' work leaves one), and the
line prints it beside the ratio, so a ratio under the target says whether the
hunt or the machine fell short.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from simulator.bench.lines import BenchLine
from simulator.scenario.conditions import parse_condition
from simulator.search.batches import BatchPool, batch_pool
from simulator.search.hunt import Hunt

SCENARIO = (Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
            / "split-settlement-quiet.toml")
NEVER_BROKEN = parse_condition("replicas < 0")
"""No run has fewer than no replicas (a fact every family reports): every
schedule drawn is tried."""
QUICK_SCHEDULES, QUICK_ROUNDS = 40, 1
FULL_SCHEDULES, FULL_ROUNDS = 120, 3
BUSY_LOOP_STEPS = 5_000_000
"""A plain loop of about a third of a second: what two free cores do twice of."""
WORKER_COUNTS = (1, 2)
SEED = 0


def search_seconds(schedules: int, workers: int, scenario: Path = SCENARIO,
                   overrides: dict[str, str] | None = None) -> float:
    """Wall seconds the search of a ``schedules``-schedule hunt of
    ``scenario`` (with ``overrides``, as ``--set``) takes with ``workers``;
    it must try every one of them."""
    baseline_done: list[float] = []

    def progress(phase: str, run: int, line: str) -> None:
        if phase == "baseline":
            baseline_done.append(time.perf_counter())

    hunt = Hunt(scenario, NEVER_BROKEN, seed=SEED, examples=schedules, time_budget_s=3600,
                progress=progress, workers=workers, overrides=overrides)
    found = hunt.search()
    ended = time.perf_counter()
    if found is not None or hunt.runs != schedules + 1:
        # Different work on the two sides would make the ratio meaningless.
        raise RuntimeError(f"the hunt of {scenario.name} with {workers} worker(s) tried "
                           f"{hunt.runs - 1} schedule(s), not {schedules}, or broke the "
                           f"invariant")
    return ended - baseline_done[0]


def busy_seconds(steps: int) -> float:
    """A plain Python loop, in a worker: its wall seconds."""
    started = time.perf_counter()
    total = 0
    for step in range(steps):
        total += step
    return time.perf_counter() - started


def free_cores(pool: BatchPool) -> float:
    """What two busy workers get done together against one alone, now."""
    alone = pool.executor.submit(busy_seconds, BUSY_LOOP_STEPS).result()
    together = [pool.executor.submit(busy_seconds, BUSY_LOOP_STEPS) for _ in range(2)]
    return 2 * alone / max(future.result() for future in together)


def free_cores_and_start_seconds() -> tuple[float, float]:
    """``free_cores``, and the wall seconds until a first local worker answered:
    the forkserver's start, its import of the lab included, once per process
    (next to none when it runs already)."""
    started = time.perf_counter()
    modules = Hunt(SCENARIO, NEVER_BROKEN).worker_modules()
    with batch_pool(max(WORKER_COUNTS), preload=modules) as pool:
        pool.executor.submit(busy_seconds, 0).result()
        start_s = time.perf_counter() - started
        return free_cores(pool), start_s


def measure_hunt_throughput(quick: bool) -> BenchLine:
    """Hunt schedules per minute with one worker and with two, and their ratio."""
    schedules = QUICK_SCHEDULES if quick else FULL_SCHEDULES
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    seconds: dict[int, list[float]] = {workers: [] for workers in WORKER_COUNTS}
    cores, start_s = [], []
    for round_number in range(rounds):
        round_cores, round_start_s = free_cores_and_start_seconds()
        cores.append(round_cores)
        start_s.append(round_start_s)
        order = WORKER_COUNTS if round_number % 2 == 0 else WORKER_COUNTS[::-1]
        for workers in order:
            seconds[workers].append(search_seconds(schedules, workers))
    one, two = seconds[1], seconds[2]
    ratio = statistics.median(alone / paired for alone, paired in zip(one, two, strict=True))
    figures = (
        f"{SCENARIO.stem}, the same {schedules} schedules each; "
        f"1 worker {60 * schedules / statistics.median(one):,.0f} schedules/min, "
        f"2 workers {60 * schedules / statistics.median(two):,.0f} schedules/min "
        f"(wall time of the search, medians of {rounds} round(s), turn about; the "
        f"forkserver's start, once per process, {start_s[0]:.1f} s, not counted); "
        f"meanwhile two workers busy with a plain loop did {statistics.median(cores):.2f}x "
        f"one's work (2.00: two free cores)"
    )
    return BenchLine("hunt", figures, "2 workers / 1 worker", ratio, ">= 1.7")
