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
from mutants.av_state.paths import beside
from stores.av_state.redis_store import SCRIPTS

MUTANT = Mutant(
    name="refusal_charges_earlier_keys",
    breaks="try_spend charges each counter as it checks it: a refusal on a later "
           "counter leaves the earlier ones charged",
    violates="004_3d0b2b7832cd8f83.txt:31-84",
    scenario={},
    damage=("partial_batches",),
    exposed_by="refusal on try_spend",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.replacing(try_spend=beside(MUTANT.name)))
