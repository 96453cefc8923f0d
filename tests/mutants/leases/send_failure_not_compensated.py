"""Mutant: a grant that arrives after its caller gave up is not compensated.

The bug: the owned invoke consumes a late reply (its caller's wait ran out
first), finds nobody to hand it to, and drops it: a lease nobody holds keeps
a slot until its TTL. The seed releases it when the send fails
(``if sender.send(result).is_err() && compensate_on_send_failure``,
002_348438d99c360737.txt:553-557, with ``compensate_abandoned_result``,
101-103). Unlike the historical ``uncompensated_abandon``, every other
compensation is kept. Exposed by a slow acquire reply.
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
    name="send_failure_not_compensated",
    breaks="an acquire's late grant that finds its caller gone is dropped, its lease kept",
    seed="002_348438d99c360737.txt:553-557",
    schedule=({"at": "500ms", "fault": "slow_reply", "replica": 0, "extra": "300ms"},),
    exposed_by="slow_reply on acquire",
)


class SendFailureNotCompensated(LeaseLimiter):
    async def _owned_invoke(self, snapshot: SharedConnection, release: LeaseRelease,
                            handoff: Handoff[InvokeOutcome], slot: Slot) -> None:
        recovery, generation, lease_id = self.recovery, snapshot.generation, release.lease_id
        try:
            with recovery.invoke(snapshot) as invoke:
                outcome = await self._invoke(snapshot, release)
                if not outcome.elapsed:
                    invoke.complete()
            self._echoes_another_lease(generation, outcome, lease_id)
            if outcome.ambiguous:
                self._compensate(release)
            handoff.send(outcome)  # the bug: a failed send compensates nothing
        finally:
            handoff.drop_sender()
            slot.release()


register_lease_mutant(MUTANT, SendFailureNotCompensated)
