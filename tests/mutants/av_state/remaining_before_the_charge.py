"""Mutant (Lua): try_spend answers the headroom its counters had before the charge.

The seed measures each counter's remaining budget after its increment, in
the script that commits, and answers the smallest
(004_3d0b2b7832cd8f83.txt:56-87): the gateway shows it to the caller and
plans its next call by it. This store subtracts the count it read before
charging: every commit overstates what is left by its own amount (down to
the floor of zero), and a caller told it still has room is refused on its
next call. Nothing the lab does rewrites a reply's figures: the store's.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="remaining_before_the_charge",
    breaks="try_spend answers the remaining budget its counters had before the charge",
    violates="004_3d0b2b7832cd8f83.txt:56-87",
    scenario={},
    damage=("remaining_misreported",),
    exposed_by="no fault",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(try_spend=(Patch(
    "    local remaining = limit - new\n",
    # The bug: the headroom of the count before this call's charge.
    "    local remaining = limit - (new - amount)\n"),)))
