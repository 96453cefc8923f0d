"""Mutant (Lua): try_spend answers a commit whose counters it only read.

The seed charges every counter of a committed batch in the script that
answers the commit (004_3d0b2b7832cd8f83.txt:67-72). This store reads each
counter where it should increment it: the caller is told committed, the
record never holds the charge, and the budget admits past its limit later.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="commit_without_charge",
    breaks="try_spend answers a commit whose counters it only read",
    violates="004_3d0b2b7832cd8f83.txt:67-72",
    scenario={},
    damage=("commits_uncharged",),
    exposed_by="no fault",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(try_spend=(Patch(
    "    local new = redis.call('INCRBY', key, amount)\n",
    # The bug: the count read, never charged.
    "    local new = tonumber(redis.call('GET', key) or '0') + amount\n"),)))
