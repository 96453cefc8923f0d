"""Mutant (Lua): try_spend gives a charged counter half the seed's TTL.

The seed keeps a counter a day after its last use, and every spend, refused
or committed, renews that day (004_3d0b2b7832cd8f83.txt:40-48, 67-72): a
session idle for longer is abandoned, not before. This store sets twelve
hours on a charge: a session idle between twelve hours and a day comes
back to a reset budget. Few runs keep a session idle that long, so the
lab reads the expiry each spend leaves on the server's virtual deadlines.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="charge_ttl_halved",
    breaks="try_spend gives a charged counter half the seed's 24 h TTL",
    violates="004_3d0b2b7832cd8f83.txt:67-72",
    scenario={},
    damage=("ttls_wrong",),
    exposed_by="no fault",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(try_spend=(Patch(
    "    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})\n    local remaining",
    # The bug: half a day.
    "    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS} / 2)\n    local remaining"),)))
