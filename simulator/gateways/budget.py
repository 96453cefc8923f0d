"""A gateway request against a budget store: reserve, run, settle.

The lifecycle every axond gateway runs: reserve the estimate; if denied,
answer 429/503; otherwise run the upstream work for its duration, then settle
the actual spend exactly once (never retried by the gateway).
"""

from __future__ import annotations

from typing import Any

from simulator.traps import Sleep
from simulator.workload import Request


async def serve(replica: Any, store: Any, request: Request) -> None:
    """Serve ``request`` on ``replica``; report truth to the oracle as it happens."""
    key = (request.namespace, request.subject)
    budget_key = replica.kind.contract.BudgetKey(request.namespace, request.subject)
    oracle = replica.oracle
    oracle.arrived(key)
    replica.record("request_arrived", request, request.estimate_microdollars)
    admission = await store.reserve(budget_key, request.estimate_microdollars)
    if not admission.is_allowed:
        reason = admission.denial.value
        oracle.denied(reason)
        replica.record("request_denied", request, request.estimate_microdollars, reason)
        return
    held = admission.reservation.is_held
    oracle.admitted(held)
    replica.record("request_admitted", request, request.estimate_microdollars,
                   "held" if held else "unheld")
    await Sleep(request.duration_us)
    oracle.completed(key, request.actual_microdollars)
    replica.record("work_completed", request, request.actual_microdollars)
    await store.settle(budget_key, admission.reservation, request.actual_microdollars)
    oracle.settled()
    replica.record("request_settled", request, request.actual_microdollars)
