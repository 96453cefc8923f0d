"""Mutant (ledger): a release that arrives past the lease's expiry, within the
grace, is accepted and credits nothing back.

The bug is on the late-release path, which only a fault takes (a sound
holder releases before expiry, ``spend_margin`` ahead): a holder paused past
its lease's expiry releases it within the grace; the mutant closes the lease
but writes its unspent units off as settlement loss. The seed: "Releases are
also accepted through the grace window" (003_fa119f058ec0ffc5.txt:264-270,
review finding GL-1), crediting ``unspent`` back (488-491)."""

from __future__ import annotations

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="release_in_grace_credits_nothing",
    breaks="a release arriving within the grace, past expiry, credits nothing back",
    seed=("003_fa119f058ec0ffc5.txt:264-270", "003_fa119f058ec0ffc5.txt:488-491"),
    # Replica 0 stops at 2 s, its leases' expiry (about 10 s) passing during
    # the pause, and wakes at 12 s, within their grace (5 s): it releases them.
    exposed_by={"faults": {"schedule": [{"at": "2s", "fault": "pause", "replica": 0,
                                         "duration": "10s"}]}},
    damage=("settlement_loss_excess_units",),
    fault="pause",
)


class CreditsNothingInGrace(LedgerWrapper):
    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        lease = self.ledger._books.leases.get(lease_id)
        if lease is not None and now > lease.grant.expires_at:
            unspent = 0  # the bug: accepted in the grace, credited nothing
        await self.ledger.release(lease_id, fencing_token, unspent, now)


KIND = register_ledger_mutant(MUTANT, wrapper=CreditsNothingInGrace)
