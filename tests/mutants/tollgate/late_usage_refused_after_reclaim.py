"""Mutant (ledger): usage for a lease the sweep reclaimed is refused.

The bug is on the reclaim's recovery path: a holder paused (or cut off)
past its lease's grace bills its last usage after the sweep reclaimed the
lease; the mutant finds the lease closed and rejects it, though its
provisional loss has room for it. The seed: "usage for the lease that
arrives later fits in that loss and converts it into billed usage"
(003_fa119f058ec0ffc5.txt:566-574, 376-383)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.domain import IngestReport, LeaseState, UsageEvent
from stores.tollgate.variants import LedgerWrapper

PAUSED_PAST_GRACE = {"faults": {"schedule": [{"at": "2s", "fault": "pause", "replica": 1,
                                              "duration": "16s"}]}}
"""Replica 1 stops at 2 s with usage unbilled and wakes at 18 s, past its
leases' expiry (about 10 s) and grace (5 s more): the sweep of the others
reclaimed them meanwhile."""

MUTANT = LedgerMutant(
    name="late_usage_refused_after_reclaim",
    breaks="ingest refuses usage for a reclaimed lease that fits its provisional loss",
    seed=("003_fa119f058ec0ffc5.txt:566-574", "003_fa119f058ec0ffc5.txt:376-383"),
    exposed_by=PAUSED_PAST_GRACE,
    damage=("billing_loss_units",),
    fault="pause",
)


class RefusesLateUsage(LedgerWrapper):
    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        leases = self.ledger._books.leases
        late = [event for event in events if event.lease_id in leases
                and leases[event.lease_id].state is LeaseState.RECLAIMED
                and event.request_id not in self.ledger._books.requests]
        report = await self.ledger.ingest([e for e in events if e not in late], now)
        return dataclasses.replace(report, rejected=report.rejected + len(late))


KIND = register_ledger_mutant(MUTANT, wrapper=RefusesLateUsage)
