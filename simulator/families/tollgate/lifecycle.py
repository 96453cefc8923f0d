"""The ledger family's request lifecycle: a spend funded by its holder's lease.

What a tollgate gateway does with a request: charge its cost to the lease
its holder keeps for the request's account (acquiring or consolidating one
when it must), then do the work. The usage is billed later, in batches, by
the holder's background loop; the oracle hears the truth from here:

* ``request_arrived`` (the oracle hears when the holder began the spend),
  then ``spend_admitted`` (the units and the lease they were charged to) or
  ``spend_refused`` (outcome: the refusal);
* ``lease_obtained`` when the spend received a new grant on the way (outcome
  ``acquire`` or ``consolidate``), with the credit given back for it.

Each key of the workload is one account, numbered from 1 in the key space's
order (``stores.tollgate.service.open_ledger`` funds them so).
"""

from __future__ import annotations

from typing import Any

from simulator.engine.traps import Sleep
from simulator.world.requests import Request


def account_of(subject: str) -> int:
    """The account a key's subject stands for (``subject-0007`` is account 8)."""
    return int(subject.rsplit("-", 1)[1]) + 1


async def serve(replica: Any, holder: Any, request: Request) -> None:
    """Serve ``request`` on ``replica``: spend, then work."""
    oracle = replica.oracle
    number = request.number
    units = request.estimate_microdollars
    replica.record("request_arrived", request, units)
    account = account_of(request.subject)
    oracle.spend_began(number, replica.source, account, replica.kernel.now)
    spend = await holder.spend(account, units, f"r{number}")
    if spend.obtained is not None:
        oracle.obtained(number, replica.source, spend.obtained, spend.restored)
        replica.record("lease_obtained", request, spend.obtained.granted,
                       outcome="consolidate" if spend.restored else "acquire")
    if spend.lease is None:
        oracle.refused(number, spend.refusal, replica.kernel.now)
        replica.record("spend_refused", request, units, outcome=spend.refusal)
    else:
        oracle.spent(number, replica.source, f"r{number}", spend.lease, units,
                     replica.kernel.now, fresh=spend.obtained is not None)
        replica.record("spend_admitted", request, units)
        await Sleep(request.duration_us)
    replica.finished(number)
