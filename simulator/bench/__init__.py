"""``python -m simulator bench``: the lab's speed, measured side by side.

Four lines, each measured in this one run and ending with a ratio:

* **Redis ceiling** — a 2,000-replica budget run on real Redis, in executed
  scripts/s, against the same scripts replayed straight to Redis through
  redis-py pipelines (``redis_ceiling``). Target lab / ceiling >= 0.5.
* **fakeredis** — the same two figures on fakeredis. Target >= 0.75.
* **Kernel** — the lab's kernel against SimPy on an equivalent model, in
  events/s (``kernel``). Target >= 1.5.
* **Scale** — a 10,000-replica run with >= 100,000 requests in flight on the
  ``memory`` backend: peak memory, wall time, virtual seconds per wall second
  (``scale``). Target peak RSS under 2 GiB.

``--quick`` shrinks every workload so the whole bench takes under a minute
(a smoke test for CI); timings are never asserted, only printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from simulator.backends.local_server import throwaway_redis
from simulator.bench.lines import BenchLine

__all__ = ["BenchLine", "run_bench"]


def run_bench(backend: str = "auto", quick: bool = False,
              echo: Callable[[str], None] = print) -> list[BenchLine]:
    """Measure and ``echo`` each line as it is ready; return them all."""
    from simulator.bench.kernel import measure_kernel
    from simulator.bench.redis_ceiling import measure_backend
    from simulator.bench.scale import measure_scale

    lines: list[BenchLine] = []

    def done(line: BenchLine) -> None:
        lines.append(line)
        echo(str(line))

    with _real_redis(backend) as url:
        if url is None:
            echo("Redis ceiling: skipped (no redis-server installed and no --backend "
                 "redis://... given)")
        else:
            done(measure_backend(url, quick, "Redis pipelined ceiling", "lab / ceiling",
                                 ">= 0.5"))
    done(measure_backend("fakeredis", quick, "fakeredis direct", "lab / direct", ">= 0.75"))
    done(measure_kernel(quick))
    done(measure_scale(quick))
    return lines


@contextmanager
def _real_redis(backend: str) -> Iterator[str | None]:
    """The real server to measure: the one named, or one the lab starts."""
    if backend.startswith(("redis://", "rediss://", "unix://")):
        yield backend
    elif backend == "auto":
        with throwaway_redis() as server:
            yield server.url if server is not None else None
    elif backend == "fakeredis":
        yield None
    else:
        raise ValueError(f"--backend: expected auto, fakeredis or redis://HOST:PORT/DB, "
                         f"got {backend!r}")
