"""A gateway request against a budget store: reserve, run, settle.

The lifecycle every axond gateway runs: reserve the estimate; if denied,
answer 429/503; otherwise run the upstream work for its duration, then settle
the actual spend exactly once (never retried by the gateway). Each step is
reported to the oracle as it happens, which is how the lab knows the truth.
"""

from __future__ import annotations

from typing import Any

from simulator.traps import Sleep
from simulator.workload import Request


async def serve(replica: Any, store: Any, request: Request) -> None:
    """Serve ``request`` on ``replica``."""
    key = (request.namespace, request.subject)
    budget_key = replica.kind.contract.BudgetKey(request.namespace, request.subject)
    oracle = replica.oracle
    kernel = replica.kernel
    number = request.number
    oracle.arrived(number, key, request.estimate_microdollars, request.actual_microdollars,
                   replica.index)
    replica.record("request_arrived", request, request.estimate_microdollars)
    admission = await store.reserve(budget_key, request.estimate_microdollars)
    replica.observe_ledger(key, number)
    if not admission.is_allowed:
        reason = admission.denial.value
        oracle.denied(number, reason, kernel.now)
        replica.record("request_denied", request, request.estimate_microdollars, reason)
        replica.finished(number)
        return
    held = admission.reservation.is_held
    oracle.admitted(number, held, kernel.now)
    replica.record("request_admitted", request, request.estimate_microdollars,
                   "held" if held else "unheld")
    await Sleep(request.duration_us)
    oracle.completed(number, kernel.now)
    replica.record("work_completed", request, request.actual_microdollars)
    await store.settle(budget_key, admission.reservation, request.actual_microdollars)
    replica.observe_ledger(key, number)
    oracle.settled(number, kernel.now)
    replica.record("request_settled", request, request.actual_microdollars)
    replica.finished(number)
