"""Mutant (Lua): try_spend checks and charges each counter in one loop.

A call refused on its second counter (its call count at the cap, its
tokens not) has already charged its first: the refusal leaves a half
charged batch, and the caller, told it was refused, never gives it back.
The seed checks every spend before it charges any, in one script
(004_3d0b2b7832cd8f83.txt:31-84). Nothing the lab does splits a script:
the damage is the store's, exposed by the refusal path.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="refusal_charges_earlier_keys",
    breaks="try_spend charges each counter as it checks it: a refusal on a later "
           "counter leaves the earlier ones charged",
    violates="004_3d0b2b7832cd8f83.txt:31-84",
    scenario={},
    damage=("partial_batches",),
    exposed_by="refusal on try_spend",
)

CHARGE_AS_CHECKED = Patch(
    "        return {-1, i}\n    end\nend\n",
    # The bug: the counter is charged in the loop that checks the next ones.
    "        return {-1, i}\n    end\n"
    "    redis.call('INCRBY', key, amount)\n"
    "    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})\nend\n")
"""Each counter charged as soon as it is checked."""
READ_NOT_CHARGED = Patch(
    "    local new = redis.call('INCRBY', key, amount)\n"
    "    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})\n"
    "    local remaining = limit - new\n",
    "    local remaining = limit - tonumber(redis.call('GET', key))\n")
"""...so the commit loop only reads the headroom."""

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(
    try_spend=(CHARGE_AS_CHECKED, READ_NOT_CHARGED)))
