"""The lease family's request lifecycle: acquire, run, let go of the permit.

What an axond gateway does with a request under a concurrency limit:
acquire a lease for its key; if refused, answer 429/503; otherwise run the
upstream work for its duration, then drop the permit, which spawns the
store's release in the background (retried by the store, never awaited by
the gateway). Each step is reported to the oracle as it happens, which is
how the lab knows the truth, and traced:

* ``request_arrived``;
* ``request_cancelled`` when its client (``workload.patience``) disconnects
  before the store decided: the gateway's handler, and the ``acquire``
  awaited in it, are cancelled where they stand, as dropping the handler's
  future does in axond (the store's own tasks run on);
* ``request_admitted`` (outcome ``enforced``, or ``unenforced`` when the
  fail-open policy admitted it with no lease) or ``request_denied``
  (outcome ``exceeded`` or ``store_unavailable``); an answer the store
  decided on a connection it no longer trusted is told first
  (``Oracle.answered_untrusted``, with how the store retired it);
* ``work_completed`` then ``permit_released`` (the release is handed to the
  store; when it lands is the store's business, seen in the calls it makes).

A request stays in its replica's ``in_flight`` for one network timeout
after it is over: a crash in that window kills the release or compensation
it spawned, and the oracle must hear of it (``Oracle.aborted``) to blame
the crash, not the store, for the lease left behind. A release on its way
longer than that has failed, and the network would have said so.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.traps import Join, Sleep
from simulator.world.requests import Request


def release_window_us(replica: Any) -> int:
    """How long what a request spawned may still be running after it is over:
    the timeout of the replica's link (the oracle's release grace is the same)."""
    return replica.call_timeout_us


async def serve(replica: Any, store: Any, request: Request) -> None:
    """Serve ``request`` on ``replica``."""
    key = (request.namespace, request.subject)
    lease_key = replica.kind.contract.LeaseKey(request.namespace, request.subject)
    oracle = replica.oracle
    kernel = replica.kernel
    number = request.number
    oracle.arrived(number, key, replica.index, kernel.now)
    replica.record("request_arrived", request)
    if request.patience_us is None:
        admission = await store.acquire(lease_key)
    else:
        admission = await _acquire_within_patience(replica, store, lease_key,
                                                   request.patience_us)
    if admission is not None and admission.untrusted:
        _tell_untrusted(oracle, store, number, admission.generation)
    if admission is None:
        oracle.cancelled(number, kernel.now)
        replica.record("request_cancelled", request)
    elif not admission.is_allowed:
        reason = admission.denial.value
        oracle.denied(number, reason, kernel.now)
        replica.record("request_denied", request, outcome=reason)
    else:
        permit = admission.permit
        enforced = permit.lease_id is not None
        oracle.admitted(number, enforced, kernel.now)
        replica.record("request_admitted", request,
                       outcome="enforced" if enforced else "unenforced")
        await Sleep(request.duration_us)
        oracle.completed(number, kernel.now)
        replica.record("work_completed", request)
        permit.release()
        replica.record("permit_released", request)
    kernel.after(release_window_us(replica), replica.finished, number)


def _tell_untrusted(oracle: Any, store: Any, number: int, generation: int) -> None:
    """Tell the oracle that request ``number``'s answer came off ``generation``,
    which the store no longer trusted, and how the store retired it."""
    retirement = store.retirement(generation)
    if retirement is None:
        oracle.answered_untrusted(number, generation, None, None, None, 0)
    else:
        oracle.answered_untrusted(number, generation, retirement.opened_ms, retirement.at_ms,
                                  retirement.invoke, retirement.ran_ms)


async def _acquire_within_patience(replica: Any, store: Any, lease_key: Any,
                                   patience_us: int) -> Any:
    """The store's answer, or ``None`` once the client's patience ran out:
    then the acquire is cancelled at the await it stands at."""
    kernel = replica.kernel
    acquire = kernel.spawn(store.acquire(lease_key), replica.owner, "acquire")
    try:
        return await Join(acquire, patience_us)
    except TimeoutError:
        kernel.cancel(acquire)
        return None
