"""Mutant (Lua): a refund that takes a counter below zero clamps it with a
SET that drops its TTL.

The underflow path runs only when a refund gives back more than the
counter holds: a whole refund (the "all" amount), or one landing after a
double debit was refunded. Its ``SET key 0`` without ``EX`` leaves the
counter with no expiry, where the seed's clamp is ``SET key 0 EX`` "to keep
the counter TTL-aligned" (004_3d0b2b7832cd8f83.txt:135-140, 173-176).
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="refund_clamp_without_ttl",
    breaks="the refunds' clamp at zero is a SET with no EX: a counter refunded below "
           "zero is left without its TTL",
    violates="004_3d0b2b7832cd8f83.txt:135-140",
    scenario={"workload": {"sessions": {"refunds": {"chance": 0.8, "whole": 0.5}}}},
    damage=("counters_without_ttl",),
    exposed_by="whole_refund on refund_many",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(
    refund=Patch("redis.call('SET', KEYS[1], 0, 'EX', ${COUNTER_TTL_SECONDS})",
                 "redis.call('SET', KEYS[1], 0)"),
    refund_many=Patch("redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})",
                      "redis.call('SET', key, 0)")))
