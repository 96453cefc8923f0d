"""The budget family's oracle for a run: one book per cap scope the run judges."""

from __future__ import annotations

from typing import Any

from simulator.oracle.scoped import BudgetOracle
from simulator.scenario import Scenario
from stores.registry import StoreKind


def budget_oracle(scenario: Scenario, kind: StoreKind, settings: Any) -> BudgetOracle:
    """The oracle of ``scenario`` run on ``kind`` with ``settings``."""
    # A namespace cap judged from the start, even if only a later migration
    # brings a store that enforces it: the overshoot before it is real too.
    every_settings = [settings] + [scenario.settings_after(step) for step in scenario.migrations]
    namespace_cap = next((cap for cap in (getattr(each, "namespace_cap_microdollars", None)
                                          for each in every_settings) if cap is not None), None)
    return BudgetOracle(subject_cap=getattr(settings, "subject_cap_microdollars", None),
                        namespace_cap=namespace_cap, per_replica=kind.per_replica,
                        holds_expire=not kind.holds_count_past_deadline,
                        reservation_ttl_ms=getattr(settings, "reservation_ttl_ms", None))
