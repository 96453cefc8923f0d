"""Mutant (Lua patch): a v1 settle that charges only if its hold was still
there (``HDEL`` returned 1).

The bug is on the path of a request that outlived its hold: a replica paused
(or slowed) past the reservation TTL, its hold reclaimed at its deadline. The
seed's settle charges regardless: "Settling an id that is no longer held (it
expired, or this is a replay) still charges: the spend happened whether or
not the hold survived" (``stores/axond_budget/settle_v1.lua``, porting
000_cfca2acab2180986.txt:110-118), and "a settlement that fails at the store
leaves the hold to expire with its TTL" (001_25c2cca22987a5cc.txt:132-135) is
about a settlement that never arrives, not one that does. This one forgives
the spend of every request whose hold expired while it ran.
"""

from __future__ import annotations

from mutants.budget import V1, FaultExposed
from stores.axond_budget import SCRIPTS, redis_kind
from stores.registry import register
from stores.scripts import Patch

PAUSES = [{"at": "100ms", "fault": "pause", "replica": replica, "duration": "700ms"}
          for replica in range(6)]
"""Six replicas paused together past the 500 ms TTL, early, while the caps
still have room: their holds expire while they run (which costs a sound store
nothing here), and once they resume and settle, the spend the mutant forgave
is what lets the caps be overshot later."""

MUTANT = FaultExposed(
    name="settle_skips_charge_for_expired_hold",
    derived_from="axond_budget.redis_v1",
    breaks="settle charges the spend only if the hold was still there",
    seed="000_cfca2acab2180986.txt:110-118",
    scenario={**V1, "store_settings": {**V1["store_settings"],
                                       "subject_cap_microdollars": 60_000},
              "workload": {**V1["workload"], "duration": "lognormal(200ms, 0.3)"},
              "faults": {"schedule": PAUSES}},
    exposing=("faults",),
    exposed_by="hold_expired_while_running",
)

CHARGES_ONLY_IF_HELD = SCRIPTS.patching(settle_v1=Patch(
    "redis.call('HDEL', KEYS[2], ARGV[1])\nlocal actual = tonumber(ARGV[2])\nif actual > 0 then",
    "local held = redis.call('HDEL', KEYS[2], ARGV[1])\nlocal actual = tonumber(ARGV[2])\n"
    "if held == 1 and actual > 0 then"))

KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, scripts=CHARGES_ONLY_IF_HELD))
