"""Mutant (Lua): refunds are not gated on their counter still existing.

A refund landing after its session's ``remove_prefix`` re-creates the
cleared counter (DECRBY on a missing key starts from 0, the clamp sets it
to 0, here with its TTL): a recycled prefix inherits a counter the cleanup
removed. The seed gates the whole DECRBY on EXISTS: "if the session was
cleared, the budget is already gone and there is nothing to compensate"
(004_3d0b2b7832cd8f83.txt:555-575). Unlike the shipped historical variant
(``refund_not_exists_gated``) the clamp keeps its TTL: only the gate is gone.
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.redis_store import SCRIPTS
from stores.scripts import Patch

MUTANT = Mutant(
    name="refund_resurrects_cleared_counter",
    breaks="refunds DECRBY a counter the session's cleanup removed, re-creating it",
    violates="004_3d0b2b7832cd8f83.txt:555-575",
    scenario={"workload": {"sessions": {"refunds": {"chance": 1.0},
                                        "call_duration": "lognormal(60s, 0.5)",
                                        "cleanup_after": "0s"}}},
    damage=("counters_resurrected",),
    exposed_by="refund_after_cleanup on refund_many",
)

KIND = register_mutant(MUTANT, scripts=SCRIPTS.patching(
    refund=Patch("if redis.call('EXISTS', KEYS[1]) == 0 then\n    return 0\nend\n", ""),
    refund_many=(Patch("    if redis.call('EXISTS', key) == 1 then\n", ""),
                 Patch("        end\n    end\nend\n", "        end\nend\n"))))
