"""Mutant (Lua): try_spend's refusal path returns without refreshing the TTL.

A session at its cap that keeps calling (every call refused) has its
counters expire 24 h after its last *successful* spend, and the next call
sees 0: its budget silently resets mid-session. The seed's refusal path
refreshes the TTL of every existing key first, because "an actively
retrying session is not abandoned" (004_3d0b2b7832cd8f83.txt:40-48). The lab
expires the counter in virtual time; the contract says a counter still
called may not expire, so the resets are the store's, exposed by the
counter's expiry.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="refusal_skips_ttl_refresh",
    breaks="try_spend refuses without refreshing the counters' TTL: a capped session "
           "that keeps calling has its budget reset a day after its last commit",
    violates="004_3d0b2b7832cd8f83.txt:40-48",
    scenario={"duration": "3h", "drain": "46h", "workload": {
        "arrivals": "poisson(3/h)", "sessions": {
            "lifetime": "uniform(40h, 44h)", "call_every": "uniform(2h, 4h)",
            "counters": {"tokens": {"amount": "uniform(100, 400)", "limit": 100_000},
                         "total_calls": {"amount": 1, "limit": 2}},
            "retries": 0}}},
    damage=("counter_resets", "budget_overshoot_units"),
    exposed_by="counter_expired",
)

SCRIPTS_WITHOUT_REFRESH = SCRIPTS.patching(try_spend=Patch(
    "        for _, other in ipairs(KEYS) do\n"
    "            if redis.call('EXISTS', other) == 1 then\n"
    "                redis.call('EXPIRE', other, ${COUNTER_TTL_SECONDS})\n"
    "            end\n"
    "        end\n", ""))

KIND = register_mutant(MUTANT, scripts=SCRIPTS_WITHOUT_REFRESH)
