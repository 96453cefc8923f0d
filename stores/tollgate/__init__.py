"""tollgate's lease ledger (seed 003): allocator, usage ingest, accounts.

* ``domain`` -- units, grants, ``GrantPolicy``, ``Conservation``, batches;
* ``errors`` -- the refusal vocabulary, apart from ``StoreError``;
* ``ports`` -- the ``LeaseAllocator``/``UsageSink``/``AdminStore`` protocols
  and the reclaim drain;
* ``memory`` -- ``MemoryLedger``, all three in one process; ``postgres`` --
  ``PostgresLedger``, the same on a real PostgreSQL;
* ``service`` -- a ledger as the lab's service node runs it; ``client`` and
  ``holder`` -- the gateway side: a holder funding spends from leases;
* ``settings``, ``kinds`` and ``variants`` -- what the lab selects.
"""

from stores.tollgate import variants
from stores.tollgate.kinds import LEDGER

KINDS = (LEDGER, *variants.KINDS)
