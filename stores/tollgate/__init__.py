"""tollgate's lease ledger (seed 003): allocator, usage ingest, accounts.

* ``domain`` -- units, grants, ``GrantPolicy``, ``Conservation``, batches;
* ``errors`` -- the refusal vocabulary, apart from ``StoreError``;
* ``ports`` -- the ``LeaseAllocator``/``UsageSink``/``AdminStore`` protocols
  and the reclaim drain;
* ``memory`` -- ``MemoryLedger``, all three in one process.

No lab kind is registered yet: a ledger needs the lab's service node first.
"""
