"""The campaign lines of ``python -m simulator bench``: a mutation campaign's
memory as it goes on, and what a second worker gives it.

Both run ``mutate`` as a user does, in a process of its own, on the lease
family's plain hunt scenario (its Lua mutants, a few schedules each).

* **Campaign memory** — the campaign's peak RSS (the kernel's high-water
  mark, ``VmHWM``) once it has judged half its mutants and once it has judged
  them all: a campaign whose memory grows with the mutants judged shows a
  ratio near 2, one whose memory is bounded a ratio near 1 (target <= 1.10).
  Linux only (it reads ``/proc``); elsewhere one line says it was skipped.
* **Campaign workers** — the same campaign with one worker and with two, in
  wall time, turn about, and whether the two tables are the same (they must
  be: each worker judges whole mutants as the one process would). Target 2 /
  1 >= 1.7; beside it, what two workers busy with a plain loop did against
  one (``hunt_speed.free_cores``), so a ratio short of the target says
  whether the campaign or a shared machine fell short.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from simulator.bench.hunt_speed import free_cores_and_start_seconds
from simulator.bench.lines import BenchLine
from simulator.sweeps.journal import JOURNAL

SCENARIO = (Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt"
            / "axond-leases.toml")
QUICK = ["--operators", "relational", "--code", "lua", "--schedules", "2"]
"""Four mutants, two schedules each: a smoke test of both lines."""
FULL = ["--code", "lua", "--schedules", "3"]
"""The lease store's 39 Lua mutants, three schedules each (the faults: all)."""
WATCH_EVERY_S = 0.05


def _campaign(out: Path, options: list[str], workers: int = 1) -> tuple[float, list[float]]:
    """Run ``mutate`` into ``out``: its wall seconds, and its peak RSS in MiB
    each time its journal gained a mutant (Linux; empty elsewhere)."""
    command = [sys.executable, "-m", "simulator", "mutate", str(SCENARIO), *options,
               "--workers", str(workers), "--out", str(out)]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    peaks: list[float] = []
    journal = out / JOURNAL
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        judged = len(journal.read_text().splitlines()) - 1 if journal.exists() else 0
        if judged > len(peaks) and status.exists():
            peaks += [_peak_mib(status)] * (judged - len(peaks))
        time.sleep(WATCH_EVERY_S)
    _, error = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"bench: the campaign exited with {process.returncode}: "
                           f"{error.strip().splitlines()[-1] if error.strip() else ''}")
    return time.perf_counter() - started, peaks


def _peak_mib(status: Path) -> float:
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _table(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "mutants.parquet").drop(columns=["seconds"])


def measure_campaign_memory(quick: bool) -> BenchLine | str:
    """Peak RSS after half the mutants against after all of them."""
    if not Path("/proc/self/status").exists():
        return "campaign memory: skipped (it reads /proc, which this system lacks)"
    with tempfile.TemporaryDirectory(prefix="lab-bench-campaign-") as temp:
        _, peaks = _campaign(Path(temp) / "out", QUICK if quick else FULL)
    if len(peaks) < 2:
        return "campaign memory: skipped (the campaign judged fewer than two mutants)"
    half = peaks[len(peaks) // 2 - 1]
    return BenchLine(
        "campaign memory",
        f"mutate {SCENARIO.stem} ({len(peaks)} mutants, one worker): peak RSS "
        f"{half:,.0f} MiB after {len(peaks) // 2} mutants, {peaks[-1]:,.0f} MiB after "
        f"{len(peaks)}", "after all / after half", peaks[-1] / half, "<= 1.10")


def measure_campaign_workers(quick: bool) -> BenchLine:
    """The campaign's wall time with one worker against two, turn about."""
    rounds = 1 if quick else 2
    seconds: dict[int, list[float]] = {1: [], 2: []}
    cores = []
    same = True
    with tempfile.TemporaryDirectory(prefix="lab-bench-campaign-") as temp:
        for round_number in range(rounds):
            cores.append(free_cores_and_start_seconds()[0])
            tables = {}
            for workers in ((1, 2) if round_number % 2 == 0 else (2, 1)):
                out = Path(temp) / f"out-{round_number}-{workers}"
                seconds[workers].append(_campaign(out, QUICK if quick else FULL, workers)[0])
                tables[workers] = _table(out)
            same = same and tables[1].equals(tables[2])
    ratio = statistics.median(one / two for one, two in zip(seconds[1], seconds[2],
                                                             strict=True))
    return BenchLine(
        "campaign workers",
        f"mutate {SCENARIO.stem}, {' '.join(QUICK if quick else FULL)}: 1 worker "
        f"{statistics.median(seconds[1]):.0f} s, 2 workers {statistics.median(seconds[2]):.0f} s "
        f"(wall time, medians of {rounds} round(s), turn about), the same table: "
        f"{'yes' if same else 'NO'}; meanwhile two workers busy with a plain loop did "
        f"{statistics.median(cores):.2f}x one's work (2.00: two free cores)",
        "2 workers / 1 worker", ratio, ">= 1.7")
