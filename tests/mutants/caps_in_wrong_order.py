"""Mutant (Python): a v2 store that passes its two caps to the reserve script swapped."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import SharedSettings
from stores.axond_budget.redis_budget import RedisBudget
from stores.ports import RedisPort, Runtime
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="caps_in_wrong_order",
    derived_from="axond_budget.redis_v2",
    breaks="v2 reserve gets the namespace cap as the subject's and the subject cap as the "
           "namespace's: a namespace is held to one subject's cap",
    scenario="mutants/v2-namespace-cap-binds.toml",
    damage=("false_denials",),
)


class CapsInWrongOrder(RedisBudget):
    def __init__(self, data: RedisPort, runtime: Runtime, settings: SharedSettings,
                 scripts: ScriptSet | None = None) -> None:
        super().__init__(data, runtime, settings, scripts)
        self._caps.reverse()  # the bug: ARGV wants the subject cap first


KIND = register_redis_mutant(MUTANT, store_class=CapsInWrongOrder)
