"""The session-counter family's lifecycle: one agent session on a gateway replica.

What an av_state gateway does with a session (``Request.session``, a
``simulator.scenario.sessions.SessionPlan``): at each tool call's offset it spends on
every counter of the call at once (``try_spend_many``); a refusal or a
failure is re-sent with the same intent after ``retry_after`` (up to
``retries`` times: a failed call may have been charged, so a re-send may
charge it twice, which the seed accepts as conservative); a committed call
``add``s to the session's tally when the plan keeps one (bookkeeping, sent
once: see ``_tally``), runs its work, then gives back what it did not use
(``refund_many``, best effort; a whole refund sends the "all" amount). At
``cleanup_at_us`` from the session's start a task of its own clears the
session's counters (``remove_prefix``), racing whatever call is
still running, as a gateway's reconciler does. The session is over when its
calls are done and its counters cleared; a crash drops it (the core tells
the oracle, ``Oracle.aborted``).

Each step is reported to the oracle as it happens (the truth) and traced:

* ``session_opened`` (amount: calls planned);
* ``spend_committed``, ``spend_refused``, ``spend_failed``, ``spend_rejected``
  (amount: the attempt, 0 first; outcome: ``call N``);
* ``tally_added``, ``tally_refused``, ``tally_failed`` (outcome: ``call N``);
* ``refund_sent`` (outcome: ``call N``);
* ``cleanup_began``, ``cleanup_ended``; ``session_closed``.

Keys are the store's ``key_prefix``, then the session's hash-tagged prefix,
then the counter's name: the store takes whole keys, as the seed's does.
After each call to a store kept in the replica (the in-memory twin), the
replica's store is read (``Replica.observe_store``) with the operation the
call was, since a twin's record does not say.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.traps import Join, Sleep
from simulator.families.av_state.books import SERVER
from simulator.world.requests import Request


def session_prefix(replica: Any, request: Request) -> str:
    """Where the session's counters live in the store."""
    assert request.session is not None
    return f"{replica.settings.key_prefix}:{request.session.prefix}"


async def serve(replica: Any, store: Any, request: Request) -> None:
    """Serve the session ``request`` opens on ``replica``."""
    plan = request.session
    assert plan is not None  # the family's oracle refuses a scenario without sessions
    oracle = replica.oracle
    kernel = replica.kernel
    number = request.number
    prefix = session_prefix(replica, request)
    started = kernel.now
    source = replica.source if replica.kind.per_replica else SERVER
    oracle.opened(number, prefix, plan, source, (request.namespace, request.subject), started)
    replica.record("session_opened", request, len(plan.calls))
    cleanup = kernel.spawn(_cleanup(replica, store, request, prefix, started), replica.owner,
                           "session cleanup")
    for index, call in enumerate(plan.calls):
        await Sleep(max(0, started + call.offset_us - kernel.now))
        if await _spend(replica, store, request, prefix, index):
            if call.tally is not None:
                await _tally(replica, store, request, prefix, index)
            await Sleep(call.work_us)
            if call.refunds:
                await _refund(replica, store, request, prefix, index)
    await Join(cleanup)
    oracle.closed(number, kernel.now)
    replica.record("session_closed", request)
    replica.finished(number)


async def _spend(replica: Any, store: Any, request: Request, prefix: str, index: int) -> bool:
    """Call ``index``'s spend, re-sent with the same intent while refused or
    failed, up to the plan's retries; whether it committed."""
    plan = request.session
    assert plan is not None
    contract = replica.kind.contract
    oracle = replica.oracle
    number = request.number
    spends = [contract.Spend(prefix + part.counter, part.amount, part.limit)
              for part in plan.calls[index].spends]
    keys = tuple(spend.key for spend in spends)
    for attempt in range(plan.retries + 1):
        if attempt:
            await Sleep(plan.retry_after_us)
        oracle.spend_sent(number, index, attempt, replica.kernel.now)
        refused_index = remaining = None
        try:
            outcome = await store.try_spend_many(spends)
        except contract.BackendError:
            answer = "failed"  # it may have been charged: the caller cannot tell
        except contract.StateError:
            answer = "rejected"  # refused before it ran (an amount past the counters' range)
        else:
            if isinstance(outcome, contract.Refused):
                answer, refused_index = "refused", outcome.index
            else:
                answer, remaining = "committed", outcome.post_commit_min_remaining
        replica.observe_store(number, ("spend", keys))
        oracle.spend_answered(number, index, answer, refused_index, replica.kernel.now,
                              remaining)
        replica.record(f"spend_{answer}", request, attempt, f"call {index}")
        if answer in ("committed", "rejected"):
            return answer == "committed"
    return False


async def _tally(replica: Any, store: Any, request: Request, prefix: str, index: int) -> None:
    """Add call ``index``'s tally, once its spend committed.

    The seed's contract decides what a failure means here. ``add`` is an
    atomic script with the spends' EVAL uncertainty: a ``BackendError`` may
    follow a count that landed, so the gateway does not re-send it (a re-send
    could count the call twice, and a tally is bookkeeping, not a budget);
    nor does a failed or refused add undo the call, whose spend committed.
    ``CounterOverflow`` is the store refusing a count past its JSON-safe
    bound: the call goes uncounted, as the seed leaves it.
    """
    plan = request.session
    assert plan is not None
    part = plan.calls[index].tally
    assert part is not None
    contract = replica.kind.contract
    oracle = replica.oracle
    key = prefix + part.counter
    oracle.tally_sent(request.number, index, replica.kernel.now)
    try:
        await store.add(key, part.amount)
    except contract.BackendError:
        answer = "failed"
    except contract.StateError:
        answer = "refused"
    else:
        answer = "added"
    replica.observe_store(request.number, ("tally", (key,)))
    oracle.tally_answered(request.number, index, answer, replica.kernel.now)
    replica.record(f"tally_{answer}", request, outcome=f"call {index}")


async def _refund(replica: Any, store: Any, request: Request, prefix: str, index: int) -> None:
    """Give back call ``index``'s unused amounts (best effort: it never fails)."""
    plan = request.session
    assert plan is not None
    contract = replica.kind.contract
    refunds = [contract.Refund(prefix + part.counter, part.amount)
               for part in plan.calls[index].refunds]
    replica.oracle.refund_sent(request.number, index, replica.kernel.now)
    replica.record("refund_sent", request, outcome=f"call {index}")
    await store.refund_many(refunds)
    replica.observe_store(request.number, ("refund", tuple(refund.key for refund in refunds)))
    replica.oracle.refund_returned(request.number, index, replica.kernel.now)


async def _cleanup(replica: Any, store: Any, request: Request, prefix: str,
                   started: int) -> None:
    """Clear the session's counters at its cleanup time, whatever still runs."""
    plan = request.session
    assert plan is not None
    kernel = replica.kernel
    await Sleep(max(0, started + plan.cleanup_at_us - kernel.now))
    replica.oracle.cleanup_began(request.number, kernel.now)
    replica.record("cleanup_began", request)
    await store.remove_prefix(prefix)
    counters = tuple(dict.fromkeys(prefix + name for call in plan.calls
                                   for name in call.counters))
    replica.observe_store(request.number, ("cleanup", counters))
    replica.oracle.cleanup_ended(request.number, kernel.now)
    replica.record("cleanup_ended", request)
