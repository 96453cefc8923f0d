"""Mutant (ledger): a consolidation re-sent for a lease it already closed runs
the exchange again: the credit restored twice, a second replacement granted.

The bug is on the consolidation's retry path: a driver re-sends a
consolidation whose reply was lost, and the mutant, finding the old lease
released with the same token, "replays" it instead of refusing. The seed:
``LeaseNotActive`` gives no authority to resume from the old lease, and the
exchange applies both halves or neither, once
(003_fa119f058ec0ffc5.txt:534-542, 500-515)."""

from __future__ import annotations

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.domain import Allocation
from stores.tollgate.errors import LeaseNotActive
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="consolidate_replays_the_exchange",
    breaks="a consolidation re-sent for a lease it closed credits it again and re-grants",
    seed=("003_fa119f058ec0ffc5.txt:534-542", "003_fa119f058ec0ffc5.txt:500-515"),
    exposed_by={"network": {"timeout": "30ms", "retries": 2},
                "faults": {"schedule": [{"at": "0s", "fault": "lose_reply", "replica": 0,
                                         "call": "consolidate", "count": 2}]}},
    damage=("conservation_violations", "fencing_violations"),
    fault="reply_lost",
)


class ReplaysTheExchange(LedgerWrapper):
    async def consolidate(self, lease_id: int, fencing_token: int, unspent: int,
                          requested: int, needed: int, ttl_ms: int, now: int) -> Allocation:
        try:
            return await self.ledger.consolidate(lease_id, fencing_token, unspent, requested,
                                                 needed, ttl_ms, now)
        except LeaseNotActive:
            lease = self.ledger._books.leases[lease_id]
            if lease.grant.fencing_token != fencing_token:
                raise
            account = lease.grant.account_id
            self.ledger._books.accounts[account].balance += unspent  # restored again
            return await self.ledger.acquire(account, requested, ttl_ms, now)


KIND = register_ledger_mutant(MUTANT, wrapper=ReplaysTheExchange)
