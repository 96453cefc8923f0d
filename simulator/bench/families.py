"""The bench lines of each store family: its own scenario against its own ceiling.

Every family's line is the same measurement as the budget family's first two
lines, on the family's own workload (``simulator.bench.workloads``):

* **axond_leases** and **av_state** (Redis scripts): executed scripts/s of a
  run on real Redis when the bench has a server (on fakeredis otherwise, and
  the line says which) against the same scripts replayed straight to a fresh
  backend through pipelines (``redis_ceiling``).
* **tollgate** (a transactional ledger): transactions/s of a run on the
  in-process ledger against the same transactions replayed straight against a
  fresh ``MemoryLedger``; and, when the lab can start a throwaway PostgreSQL,
  a run on it against the same transactions replayed straight against a fresh
  ``PostgresLedger`` on the same server (``service_ceiling``).

**Targets.** A Redis family's targets are the budget family's: lab / ceiling
>= 0.3 on real Redis and lab / direct >= 0.6 on fakeredis (issue 18). The
ratio measures the same thing for every family -- the lab's own cost per
executed script (kernel, network, shim, oracle, trace) against the backend's
cost for the bare body -- and that machinery is shared, so a family's ratio
well below the budget family's points at its own lifecycle or oracle. One
difference is the workload's, not the lab's: the families' committed
scenarios are far less busy than ``bench-2000`` (1.0-1.5 scripts per pipeline
against 22), so the lab seldom shares a round trip between scripts while the
replay always does; one full bench on a loaded machine gave 0.06 for both
against the budget family's 0.08.

The tollgate lines have no budget-family twin. Both take the Redis
ceiling's target, >= 0.3, for these reasons (figures from ``bench --quick``
runs on a loaded two-core machine):

* on the in-process ledger, a replayed transaction costs the store's own
  Python only, 20-40 us, the order of a script replayed to real Redis through
  a pipeline (12-19 us, ``docs/speed.md``), so the same ratio asks the same
  of the lab per unit of work. Today 0.06-0.10: per transaction the lab
  also simulates about three spends the holders fund from their leases
  without a call (11,091 spends for 3,540 transactions in the committed
  scenario), and the oracle reads the ledger after each transaction;
* on PostgreSQL, the reference is a real server's, as the Redis ceiling's
  is, and the lab's cost per transaction is mostly the database's too. The
  oracle reads what it checks after a transaction in one read transaction
  (``LedgerInspection.inspect``: 0.88 reads per transaction on the committed
  scenario) where it used to make one per lease and per account (about 2.6,
  5.9 service calls per transaction in all); a 10-second run on a throwaway
  PostgreSQL went from 4.1 s to 2.5 s with the same summary.
"""

from __future__ import annotations

from simulator.backends.local_postgres import ThrowawayPostgres, postgres_binaries
from simulator.bench.lines import BenchLine
from simulator.bench.redis_ceiling import measure_backend
from simulator.bench.service_ceiling import measure_service
from simulator.bench.workloads import (
    AV_STATE,
    AV_STATE_BUSY,
    LEASES,
    LEASES_BUSY,
    TOLLGATE,
    TOLLGATE_POSTGRES,
    BenchWorkload,
)

REDIS_CEILING_TARGET = ">= 0.3"
"""lab / ceiling on real Redis (issue 18), for every Redis family."""
FAKEREDIS_DIRECT_TARGET = ">= 0.6"
"""lab / direct on fakeredis (issue 18), for every Redis family."""

REDIS_FAMILIES: dict[str, BenchWorkload] = {
    "axond_leases": LEASES, "axond_leases busy": LEASES_BUSY,
    "av_state": AV_STATE, "av_state busy": AV_STATE_BUSY}
"""The Redis families besides the budget family (which has the first two
lines), by the name of their line: each family's committed scenario, and a
busy one (tens of scripts per pipeline, as ``bench-2000``): the lab's cost
per script where it can share round trips, as the budget line measures it."""


def measure_redis_family(name: str, workload: BenchWorkload, url: str | None,
                         quick: bool) -> BenchLine:
    """``name``'s line: on the real server at ``url``, or on fakeredis for None."""
    if url is None:
        return measure_backend("fakeredis", quick, "fakeredis direct", "lab / direct",
                               FAKEREDIS_DIRECT_TARGET, workload, name)
    return measure_backend(url, quick, "Redis pipelined ceiling", "lab / ceiling",
                           REDIS_CEILING_TARGET, workload, name)


def measure_tollgate_memory(quick: bool) -> BenchLine:
    """The tollgate run in process against ``MemoryLedger`` replayed directly."""
    return measure_service(TOLLGATE, quick, "tollgate memory", None, "the in-process ledger",
                           "MemoryLedger direct", "lab / direct", REDIS_CEILING_TARGET)


def measure_tollgate_postgres(quick: bool) -> BenchLine | str:
    """The tollgate run on a throwaway PostgreSQL against ``PostgresLedger``
    replayed directly on the same server; or, when no PostgreSQL can be
    started, the one line that says why the line is skipped."""
    binaries = postgres_binaries()
    if binaries is None:
        return "tollgate PostgreSQL: skipped (no PostgreSQL installed: initdb and postgres)"
    try:
        server = ThrowawayPostgres(binaries)
    except Exception as error:  # any reason it would not start is a skip, said in one line
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        return f"tollgate PostgreSQL: skipped (a throwaway PostgreSQL did not start: {reason})"
    with server:
        return measure_service(TOLLGATE_POSTGRES, quick, "tollgate PostgreSQL", server.dsn,
                               "a throwaway PostgreSQL", "PostgresLedger direct",
                               "lab / direct", REDIS_CEILING_TARGET)
