"""Mutant (ledger): a release of a lease already released, with its own
token, credits the unspent units again.

The bug is on the release's retry path: a holder whose release reply was
lost sends the release again; "idempotently", the mutant answers success and
credits the balance once more, so the account holds units it was never
funded with. The seed: a release requires the stored pair and closes the
lease; a lease no longer active answers ``LeaseNotActive``
(003_fa119f058ec0ffc5.txt:488-499, 56-58)."""

from __future__ import annotations

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.errors import LeaseNotActive
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="release_credits_again_when_not_active",
    breaks="a release re-sent for a released lease credits its unspent units again",
    seed=("003_fa119f058ec0ffc5.txt:488-499", "003_fa119f058ec0ffc5.txt:56-58"),
    exposed_by={"faults": {"schedule": [{"at": "0s", "fault": "lose_reply", "replica": 2,
                                         "call": "release", "count": 2}]}},
    damage=("conservation_violations", "conservation_residual_max_units"),
    fault="reply_lost",
)


class CreditsAgainWhenNotActive(LedgerWrapper):
    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        try:
            await self.ledger.release(lease_id, fencing_token, unspent, now)
        except LeaseNotActive:
            lease = self.ledger._books.leases[lease_id]
            if lease.grant.fencing_token != fencing_token:
                raise
            self.ledger._books.accounts[lease.grant.account_id].balance += unspent


KIND = register_ledger_mutant(MUTANT, wrapper=CreditsAgainWhenNotActive)
