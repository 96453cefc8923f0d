"""Mutant: an acquire whose outcome is ambiguous is not compensated.

The bug: when the owned invoke ends in an error or its liveness deadline
(the script may or may not have written the lease), the invoke walks away;
the caller, long timed out, cannot clean up either. The seed spawns the
compensating release for every ambiguous outcome (``if ambiguous {
abandoned_release.clone().spawn(); }``, 002_348438d99c360737.txt:546-552).
Exposed by a stalled connection under an acquire: the script ran, its reply
never came, and the invoke ran out its deadline.
"""

from __future__ import annotations

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.generations import SharedConnection
from stores.axond_leases.handoff import Handoff
from stores.axond_leases.outcome import InvokeOutcome
from stores.axond_leases.release import LeaseRelease
from stores.axond_leases.slots import Slot

MUTANT = LeaseMutant(
    name="ambiguous_outcome_not_compensated",
    breaks="an acquire invoke ending in an error or its deadline leaves its lease to the TTL",
    seed="002_348438d99c360737.txt:546-552",
    schedule=({"at": "500ms", "fault": "connection_stall", "replica": 0, "call": "acquire"},),
    exposed_by="connection_stalled on acquire",
)


class AmbiguousOutcomeNotCompensated(LeaseLimiter):
    async def _owned_invoke(self, snapshot: SharedConnection, release: LeaseRelease,
                            handoff: Handoff[InvokeOutcome], slot: Slot) -> None:
        recovery, generation, lease_id = self.recovery, snapshot.generation, release.lease_id
        try:
            with recovery.invoke(snapshot) as invoke:
                outcome = await self._invoke(snapshot, release)
                if not outcome.elapsed:
                    invoke.complete()
            result_untrusted = recovery.is_untrusted(generation)
            mismatched = self._echoes_another_lease(generation, outcome, lease_id)
            # The bug: no compensation for an ambiguous outcome here.
            compensate = mismatched or (outcome.granted or (result_untrusted
                                                            and outcome.answered))
            if not handoff.send(outcome) and compensate:
                self._compensate(release)
        finally:
            handoff.drop_sender()
            slot.release()


register_lease_mutant(MUTANT, AmbiguousOutcomeNotCompensated)
