"""``python -m simulator bench``: the lab's speed, measured side by side.

One line per measurement, each measured in this one run and ending with a
ratio and its target (issue 18's, for the lines it names):

* **Redis ceiling** — a 2,000-replica budget run on real Redis, in executed
  scripts/s, against the same scripts replayed straight to Redis through
  redis-py pipelines (``redis_ceiling``). Target lab / ceiling >= 0.3.
* **fakeredis** — the same two figures on fakeredis. Target >= 0.6.
* **axond_leases**, **av_state** — each Redis family's own scenario against
  its own ceiling, the same way: on real Redis when the bench has a server,
  else on fakeredis (the line says which), with the budget family's targets
  (``families``).
* **Time per event** — the lab's CPU and wall time per kernel event of whole
  runs, on each backend, at the sizes the README names: the demo (300
  replicas) in memory, on fakeredis and on real Redis, 10,000 replicas in
  memory and on fakeredis, the ledger family in memory and on PostgreSQL
  (``per_event``).
* **tollgate memory**, **tollgate PostgreSQL** — the ledger family's scenario
  in transactions/s against the same transactions replayed straight against
  a fresh ledger: in process, and on a throwaway PostgreSQL when one can be
  started (skipped in one line otherwise) (``families``, ``service_ceiling``).
* **Kernel** — the lab's kernel against SimPy on an equivalent model, in
  events/s (``kernel``).
* **Scale** — a 10,000-replica run with >= 100,000 requests in flight on the
  ``memory`` backend: peak memory, wall time, virtual seconds per wall second
  (``scale``). Target peak RSS under 2 GiB.
* **Hunt** — schedules a hunt judges per minute with one worker and with two,
  side by side on one quiet scenario (``hunt_speed``). Target 2 / 1 >= 1.7.
* **Hunt engines** — schedules a one-worker hunt judges per minute on each
  plain hunt scenario on the lab's Valkey engine against fakeredis
  (``hunt_engines``). Target: 2x issue 39's fakeredis figures.
* **Reach** — a run recording its reach (the store lines it executed, as
  every hunt's run does) against the same run without, on each family's
  plain hunt scenario (``reach_cost``). Printed.
* **Campaign memory**, **campaign workers** — a ``mutate`` campaign's peak
  memory after half its mutants against after all (target <= 1.10), and its
  wall time with one worker against two, with the same table (target >= 1.7)
  (``campaigns``).

``--quick`` shrinks every workload so the whole bench takes about a minute
(a smoke test for CI); timings are never asserted, only printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from simulator.backends.engine import engine_binary
from simulator.backends.local_server import ThrowawayRedis, throwaway_redis
from simulator.bench.lines import BenchLine

__all__ = ["BenchLine", "run_bench"]


def run_bench(backend: str = "auto", quick: bool = False,
              echo: Callable[[str], None] = print) -> list[BenchLine]:
    """Measure and ``echo`` each line as it is ready; return them all."""
    from simulator.bench.campaigns import measure_campaign_memory, measure_campaign_workers
    from simulator.bench.families import (
        FAKEREDIS_DIRECT_TARGET,
        REDIS_CEILING_TARGET,
        REDIS_FAMILIES,
        measure_redis_family,
        measure_tollgate_memory,
        measure_tollgate_postgres,
    )
    from simulator.bench.hunt_engines import measure_hunt_engines
    from simulator.bench.hunt_speed import measure_hunt_throughput
    from simulator.bench.kernel import measure_kernel
    from simulator.bench.per_event import measure_per_event
    from simulator.bench.reach_cost import measure_reach_cost
    from simulator.bench.redis_ceiling import measure_backend
    from simulator.bench.scale import measure_scale

    lines: list[BenchLine] = []

    def done(line: BenchLine | str) -> None:
        """Keep and print a measured line; print a skipped one's reason."""
        if isinstance(line, BenchLine):
            lines.append(line)
        echo(str(line))

    with _real_redis(backend) as url:
        if url is None:
            echo("Redis ceiling: skipped (no redis-server or Valkey engine installed and no "
                 "--backend redis://... given)")
        else:
            done(measure_backend(url, quick, "Redis pipelined ceiling", "lab / ceiling",
                                 REDIS_CEILING_TARGET))
        done(measure_backend("fakeredis", quick, "fakeredis direct", "lab / direct",
                             FAKEREDIS_DIRECT_TARGET))
        for name, workload in REDIS_FAMILIES.items():
            done(measure_redis_family(name, workload, url, quick))
        for line in measure_per_event(url, quick):
            done(line)
    done(measure_tollgate_memory(quick))
    done(measure_tollgate_postgres(quick))
    done(measure_kernel(quick))
    done(measure_scale(quick))
    done(measure_hunt_throughput(quick))
    done(measure_hunt_engines(quick))
    done(measure_reach_cost(quick))
    done(measure_campaign_memory(quick))
    done(measure_campaign_workers(quick))
    return lines


@contextmanager
def _real_redis(backend: str) -> Iterator[str | None]:
    """The real server to measure: the one named, or one the lab starts."""
    if backend.startswith(("redis://", "rediss://", "unix://")):
        yield backend
    elif backend == "auto":
        with throwaway_redis() as server:
            if server is not None:
                yield server.url
                return
        # No redis-server installed: the engine's Valkey is a real server too.
        binary = engine_binary()
        if binary is None:
            yield None
            return
        valkey = ThrowawayRedis(binary)
        try:
            yield valkey.url
        finally:
            valkey.stop()
    elif backend == "fakeredis":
        yield None
    else:
        raise ValueError(f"--backend: expected auto, fakeredis or redis://HOST:PORT/DB, "
                         f"got {backend!r}")
