"""Mutant: a reply echoing another lease id is refused, but its own lease is kept.

The bug: when an acquire's reply echoes another acquire's lease id (the
shared connection's replies are shifted), the caller is answered unavailable
as it must be, but the lease its own script may have written is never given
back: a refused caller's lease stays counted until its TTL. The seed
releases it (``release.spawn()`` before answering "echoed a different lease
id", 002_348438d99c360737.txt:614-618 and 568-575). Exposed by a dropped
waiter, which misaligns the replies behind it.
"""

from __future__ import annotations

from typing import Any

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.outcome import InvokeOutcome
from stores.axond_leases.release import LeaseRelease

MUTANT = LeaseMutant(
    name="mismatch_refusal_keeps_lease",
    breaks="an acquire whose reply echoes another lease id is refused without "
           "compensating its own lease",
    seed="002_348438d99c360737.txt:614-618",
    schedule=({"at": "500ms", "fault": "dropped_waiter", "replica": 0},),
    exposed_by="misaligned_reply on acquire",
    # Busy enough, on two replicas, that replies queue behind the dropped waiter.
    changes={"fleet": {"replicas": 2}, "network": {"latency": "lognormal(10ms, 0.3)"},
             "workload": {"arrivals": "poisson(40/s)"}},
)


class MismatchRefusalKeepsLease(LeaseLimiter):
    """Remembers the acquires whose reply echoed another id, and never
    compensates them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mismatched: set[str] = set()

    def _echoes_another_lease(self, generation: int, outcome: InvokeOutcome,
                              lease_id: str) -> bool:
        mismatched = super()._echoes_another_lease(generation, outcome, lease_id)
        if mismatched:
            self._mismatched.add(lease_id)
        return mismatched

    def _compensate(self, release: LeaseRelease) -> None:
        if release.lease_id in self._mismatched:
            return  # the bug: the refused caller's lease is left counted
        super()._compensate(release)


register_lease_mutant(MUTANT, MismatchRefusalKeepsLease)
