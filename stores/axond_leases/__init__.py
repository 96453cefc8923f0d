"""axond's concurrency leases: at most ``max_in_flight`` requests of one
(namespace, subject) in flight, fleet-wide (axond 0.3.8's ``RedisRateLimiter``).

Kinds registered for the lab (see ``stores.registry``):

* ``axond_leases.redis`` -- the shared Redis limiter: one Lua script per
  acquire and release, a shared multiplexed connection retired and replaced
  when it may be misaligned, compensation of abandoned acquires, release
  retries on fresh connections;
* the historical variants in ``variants.KINDS``.

A plugin registers a kind of its own with ``redis_kind`` (a ``LeaseLimiter``
subclass, or the shipped class with some of ``SCRIPTS`` replaced).
"""

from __future__ import annotations

from stores.axond_leases import contract, variants
from stores.axond_leases.kinds import decode, ledger_keys, redis_kind
from stores.axond_leases.limiter import SCRIPTS, LeaseLimiter
from stores.axond_leases.settings import LeaseSettings

__all__ = ["KINDS", "SCRIPTS", "LeaseLimiter", "LeaseSettings", "contract", "decode",
           "ledger_keys", "redis_kind"]

KINDS = (
    redis_kind("axond_leases.redis",
               "Redis concurrency leases: one Lua script per acquire/release, a shared "
               "connection replaced when misaligned, compensated abandoned acquires"),
    *variants.KINDS,
)
