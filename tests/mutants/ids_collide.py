"""Mutant (Python): reservation ids from a counter of each replica's, not the runtime."""

from __future__ import annotations

import itertools
from typing import Any

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import SharedSettings
from stores.axond_budget.redis_budget import RedisBudget
from stores.ports import RedisPort, Runtime
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="ids_collide",
    derived_from="axond_budget.redis_v1",
    breaks="reservation ids come from a per-replica counter (r1, r2...), so replicas reuse "
           "each other's ids: a hold overwrites another's, a settle deletes another's",
    scenario="mutants/v1-busy-subjects.toml",
    damage=("wrongful_admissions",),
)


class _CountedIds:
    """The runtime, but ``new_id`` counts from 1 in each store: the bug."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._numbers = itertools.count(1)

    def new_id(self) -> str:
        return f"r{next(self._numbers)}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class IdsCollide(RedisBudget):
    def __init__(self, data: RedisPort, runtime: Runtime, settings: SharedSettings,
                 scripts: ScriptSet | None = None) -> None:
        super().__init__(data, _CountedIds(runtime), settings, scripts)  # type: ignore[arg-type]


KIND = register_redis_mutant(MUTANT, store_class=IdsCollide)
