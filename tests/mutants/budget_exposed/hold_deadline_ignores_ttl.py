"""Mutant (Lua, v1): holds are written with ten times the reservation TTL.

The bug: the reserve stamps each hold's deadline ten TTLs out. A request
that settles drops its hold at once, so a quiet run shows nothing; but a
hold its replica died holding is reclaimed only at that deadline, and until
then it denies requests the cap has room for. The seed bounds a dead
replica's wedge by the reservation TTL: "each reservation carries its own
deadline and the reserve script reclaims the expired ones before it
decides" (``000_cfca2acab2180986.txt:12-15``, ``77-79``), and the deadline
is ``now + ttl_ms`` (``000_cfca2acab2180986.txt:105``).

Exposed by ``replica_crash`` (a crashed holder), on the reclaim path.
"""

from __future__ import annotations

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.scripts import Patch

MUTANT = Mutant(
    name="hold_deadline_ignores_ttl",
    derived_from="axond_budget.redis_v1",
    breaks="reserve writes each hold's deadline ten reservation TTLs out, so a crashed "
           "replica's holds are reclaimed ten times too late",
    scenario="budget-exposed-crashed-holders.toml",
    damage=("leaks", "false_denials"),
    replaces="reserve_v1",
)


KIND = register_exposed(MUTANT, Patch(
    "redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms))\n"
    "-- The hash as a whole outlives its newest hold, so an idle subject's holds\n"
    "-- vanish even if no later reserve comes to reclaim them.\n"
    "redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)",
    # The bug: the deadline (and the hash's expiry) ten TTLs out.
    "redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms * 10))\n"
    "redis.call('PEXPIRE', KEYS[2], ttl_ms * 20)"))
