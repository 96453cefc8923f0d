"""av_state's session counters (seed 004): multi-key spends against limits,
refunds that must not mint budget, 24-hour counters.

Kinds registered for the lab (see ``stores.registry``):

* ``av_state.redis`` -- the shared Redis store: one Lua script per spend,
  add, fetch_max, refund and refund batch, a 24 h TTL on every counter it
  touches, one-shot replay markers on refunds;
* ``av_state.in_memory`` -- the in-memory twin, one process's counters, which
  never expire;
* the historical variants in ``variants.KINDS``.

A plugin registers a kind of its own with ``redis_kind`` (a
``RedisStateStore`` subclass, or the shipped class with some of ``SCRIPTS``
replaced).
"""

from __future__ import annotations

from stores.av_state import contract, variants
from stores.av_state.in_memory import InMemoryStateStore, read_ledgers
from stores.av_state.kinds import COUNTER_ROLE, IN_MEMORY, PROTOCOL, decode, ledger_keys, redis_kind
from stores.av_state.redis_store import SCRIPTS, RedisStateStore, with_ttls
from stores.av_state.settings import StateSettings
from stores.av_state.transports import validate_transports

__all__ = ["COUNTER_ROLE", "KINDS", "PROTOCOL", "SCRIPTS", "InMemoryStateStore",
           "RedisStateStore", "StateSettings", "contract", "decode", "ledger_keys",
           "read_ledgers", "redis_kind", "validate_transports", "with_ttls"]

KINDS = (
    redis_kind("av_state.redis",
               "Redis session counters: atomic multi-key spends, refunds with one-shot "
               "replay markers, a 24 h TTL on every counter"),
    IN_MEMORY,
    *variants.KINDS,
)
