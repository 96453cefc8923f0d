"""The budget family's request lifecycle: reserve, run, settle.

What every axond gateway does with a request: reserve the estimate; if denied,
answer 429/503; otherwise run the upstream work for its duration, then settle
the actual spend exactly once (never retried by the gateway). Each step is
reported to the oracle as it happens, which is how the lab knows the truth;
after each call to a store kept in the replica, the replica's store is read
(``Replica.observe_store``: shared stores are observed by the server).
"""

from __future__ import annotations

from typing import Any

from simulator.engine.traps import Sleep
from simulator.world.requests import Request


async def serve(replica: Any, store: Any, request: Request) -> None:
    """Serve ``request`` on ``replica``."""
    key = (request.namespace, request.subject)
    budget_key = replica.kind.contract.BudgetKey(request.namespace, request.subject)
    oracle = replica.oracle
    kernel = replica.kernel
    number = request.number
    oracle.arrived(number, key, request.estimate_microdollars, request.actual_microdollars,
                   replica.index, kernel.now, replica.booted_us)
    replica.record("request_arrived", request, request.estimate_microdollars)
    admission = await store.reserve(budget_key, request.estimate_microdollars)
    replica.observe_store(number, key)
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
    replica.observe_store(number, key)
    oracle.settled(number, kernel.now)
    replica.record("request_settled", request, request.actual_microdollars)
    replica.finished(number)
