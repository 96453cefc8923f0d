"""Answers read off a retired generation: was the retirement warranted, and what exposed it.

A lease store reads acquires' replies off one shared, multiplexed connection
and numbers each connection a *generation*; a generation it may no longer
trust (an invoke outlived its liveness deadline, a reply echoed another
lease id) is retired, and every reply still owed on it is *untrusted*. The
store records the generation an answer was decided on, whether it still
trusted it, and the generation's ``Retirement`` (when it was opened, when
and by what it was retired); the lifecycle hands them to the oracle.

Two rules of the seed (``contract``) make that evidence:

* **A retirement is warranted** when the connection really failed: the lab
  lost, stalled, reset, misaligned or timed out a call on the replica while
  the generation was current (``causes.CALL_FAILURES``), or the reply a
  retiring invoke waited for was later than the seed's liveness budget, or
  a reply echoed another lease id (only a misaligned connection does that).
  A retirement by an acquire invoke that ran less than ``LIVENESS_FLOOR``
  times the caller's timeout, with the connection healthy, is not: the seed
  gives the owned invoke a liveness budget longer than the caller's wait
  precisely so that a merely slow reply does not retire a healthy
  connection (seed 002:65-69, 002:517-520; its test, 002:1514-1545: a reply
  twice the caller's timeout late must not retire the generation). Nor is
  a retirement for an echoed lease id on a connection the lab failed no
  call on: only a misaligned connection echoes one, and only a failed call
  misaligns it.
* **An untrusted reply is never a verdict**: a sound store answers it as
  unavailable, a refusal as much as a grant (seed 002:620-623, 002:1555-1595).

So the fail-open admissions that follow an unwarranted retirement, and any
*exceeded* read off an untrusted generation, are the store's, exposed by the
first fault the lab did on the replica while that generation was current.
"""

from __future__ import annotations

from simulator.families.axond_leases.books import Fault, Untrusted
from simulator.families.axond_leases.causes import CALL_FAILURES

LIVENESS_FLOOR = 2
"""The least liveness budget the seed allows an acquire invoke, in caller
timeouts: a reply this late must not retire its generation
(``caller_timeout_does_not_retire_a_slow_but_usable_invoke``, the last of
``contract.LIVENESS``)."""

FRESH_CONNECTION = "connect"
"""The call a fault on a fresh connection's opening hit: not the shared one."""


def connection_failed(fault: Fault) -> bool:
    """Whether ``fault`` really failed a call on the shared connection: its
    reply will never come (lost, stalled, reset, refused), came to another
    caller, or came later than the network's timeout."""
    return fault.what in CALL_FAILURES and fault.call != FRESH_CONNECTION


def judge_retirement(generation: int, invoke: str | None, ran_ms: int,
                     faults: list[Fault], caller_timeout_ms: int | None) -> Untrusted:
    """The untrusted generation ``generation``, retired by ``invoke``
    (``acquire``, ``release``; ``None``: an echoed lease id) after it ran
    ``ran_ms``, with ``faults`` the lab did on its replica while it was
    current (in order): warranted or not, and what exposed it."""
    fault = faults[0] if faults else None
    failed = next((each for each in faults if connection_failed(each)), None)
    if invoke is None:
        # Only a misaligned connection echoes another lease id, and only a
        # call the lab failed misaligns one.
        if failed is not None:
            return Untrusted(generation, True, fault, "a reply echoed another lease id")
        return Untrusted(generation, False, fault,
                         "it said a reply echoed another lease id, on a connection nothing "
                         "failed")
    why = f"an {invoke} invoke on it ran {ran_ms} ms"
    if failed is not None:
        return Untrusted(generation, True, fault, f"{why} after {failed.what} on {failed.call}")
    floor = None if caller_timeout_ms is None else LIVENESS_FLOOR * caller_timeout_ms
    if invoke != "acquire" or floor is None or ran_ms >= floor:
        return Untrusted(generation, True, fault, why)
    return Untrusted(generation, False, fault,
                     f"{why} (under the seed's liveness budget, {floor} ms) on a connection "
                     "nothing failed")


def unknown_retirement(generation: int, faults: list[Fault]) -> Untrusted:
    """An untrusted generation whose retirement the store did not record,
    ``faults`` what the lab did on its replica so far: taken as warranted
    when any of them could have warranted it (the lab cannot say which);
    with none, nothing failed on the replica, and a sound store retires no
    connection that nothing failed."""
    if any(connection_failed(fault) for fault in faults):
        return Untrusted(generation, True, faults[0], "retired (not recorded how)")
    return Untrusted(generation, False, faults[0] if faults else None,
                     "retired with no record of why, on a replica where the lab had "
                     "failed no call")
