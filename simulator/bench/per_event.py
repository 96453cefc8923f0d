"""The per-event line of ``python -m simulator bench``: what one kernel event
of a run costs the lab, on each backend, at the sizes the README names.

Each run is a real ``python -m simulator run`` in a fresh process, and its
figures are the ones it writes in ``run_info.json`` (``cpu_ms_per_event``:
the lab's own CPU, a real server's excluded; ``wall_ms_per_event``). The
sizes: the demo (300 replicas) on ``memory`` (the budget family's in-memory
store), fakeredis, the lab's Valkey engine and a real Redis; 10,000 replicas
(``bench-scale-10k``, shortened) in memory, on fakeredis and on the engine;
the ledger family's scenario in memory and on a throwaway PostgreSQL.
``--quick`` shortens each run and says so. Two ratios: what 10,000 replicas
cost per event against 300, on fakeredis; and what the engine costs the lab
per event of the 10,000-replica run against fakeredis (issue 39's target: at
most half).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from simulator.bench.lines import BenchLine

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"


@dataclass(frozen=True)
class Size:
    """One measured run: a scenario at a size, on a backend."""

    label: str
    scenario: str
    backend: str
    overrides: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    """Further overrides under ``--quick``."""


TEN_THOUSAND = ("duration=2s", "drain=10s", "workload.duration=lognormal(5s, 0.2)")
"""bench-scale-10k shortened: every replica boots, about 16,000 requests."""

SIZES = (
    Size("demo, 300 replicas, memory", "demo.toml", "memory",
         ("store=axond_budget.in_memory",), ("duration=5s",)),
    Size("demo, 300 replicas, fakeredis", "demo.toml", "fakeredis", (), ("duration=5s",)),
    Size("demo, 300 replicas, Valkey engine", "demo.toml", "valkey", (), ("duration=5s",)),
    Size("demo, 300 replicas, Redis", "demo.toml", "REDIS", (), ("duration=5s",)),
    Size("10,000 replicas, memory", "bench-scale-10k.toml", "memory", TEN_THOUSAND,
         ("workload.arrivals=poisson(2000/s)",)),
    Size("10,000 replicas, fakeredis", "bench-scale-10k.toml", "fakeredis",
         ("store=axond_budget.redis_v1", *TEN_THOUSAND),
         ("workload.arrivals=poisson(2000/s)",)),
    Size("10,000 replicas, Valkey engine", "bench-scale-10k.toml", "valkey",
         ("store=axond_budget.redis_v1", *TEN_THOUSAND),
         ("workload.arrivals=poisson(2000/s)",)),
    Size("tollgate, memory", "tollgate.toml", "memory", (), ("duration=20s",)),
    Size("tollgate, PostgreSQL", "tollgate.toml", "postgresql", (), ("duration=20s",)),
)


def run_info(size: Size, backend: str, quick: bool) -> dict:
    """The run's ``run_info.json``, from a fresh process."""
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as out:
        command = [sys.executable, "-m", "simulator", "run", str(SCENARIOS / size.scenario),
                   "--backend", backend, "--out", out, "--quiet"]
        for override in size.overrides + (size.quick if quick else ()):
            command += ["--set", override]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        # 0, or a run whose verdicts or [expect] entries failed (3): still measured.
        if completed.returncode not in (0, 3):
            raise RuntimeError(f"{size.label}: exit {completed.returncode}: "
                               f"{completed.stderr.strip()[-500:]}")
        return json.loads((Path(out) / "run_info.json").read_text())


def measure_per_event(redis_url: str | None, quick: bool) -> list[BenchLine]:
    """CPU and wall milliseconds per kernel event of each size; the ratios:
    what 10,000 replicas cost per event on fakeredis against 300, and on the
    engine against fakeredis."""
    figures, cpu = [], {}
    for size in SIZES:
        backend = redis_url if size.backend == "REDIS" else size.backend
        if backend is None:
            figures.append(f"{size.label}: skipped (no redis-server)")
            continue
        try:
            info = run_info(size, backend, quick)
        except RuntimeError as error:
            figures.append(f"skipped ({error})")
            continue
        cpu[size.label] = info["cpu_ms_per_event"]
        figures.append(f"{size.label}: {info['cpu_ms_per_event']} ms CPU "
                       f"({info['wall_ms_per_event']} wall) x {info['kernel_events']:,}")
    scaled = "10,000 replicas, fakeredis"
    small = "demo, 300 replicas, fakeredis"
    ratio = cpu[scaled] / cpu[small] if scaled in cpu and cpu.get(small) else float("nan")
    engine = "10,000 replicas, Valkey engine"
    on_engine = cpu[engine] / cpu[scaled] if engine in cpu and cpu.get(scaled) else float("nan")
    prefix = "quick: shortened runs; " if quick else ""
    return [BenchLine("time per event", prefix + "; ".join(figures),
                      "CPU per event, 10,000 / 300 replicas on fakeredis", ratio),
            BenchLine("engine time per event", f"{prefix}10,000 replicas: "
                      f"{cpu.get(engine)} ms CPU per event on the engine, {cpu.get(scaled)} "
                      "on fakeredis (the lab's process; the server's own CPU is not counted)",
                      "engine / fakeredis CPU per event", on_engine, "<= 0.5")]
