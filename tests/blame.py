"""Whom a run's verdict blames: the nonzero damage metrics split by cause.

Every family files damage as ``<metric>_by_<cause>``; ``store_logic`` is the
store's own, any other cause something the lab did (DESIGN "Who is to blame").
"""

from __future__ import annotations

from typing import Any

STORE = "_by_store_logic"


def blamed_on_the_store(summary: dict[str, Any]) -> dict[str, Any]:
    """The nonzero metrics filed under ``store_logic``."""
    return {name: value for name, value in summary.items() if value and name.endswith(STORE)}


def blamed_on_the_lab(summary: dict[str, Any]) -> dict[str, Any]:
    """The nonzero metrics filed under a cause of the lab's."""
    return {name: value for name, value in summary.items()
            if value and "_by_" in name and not name.endswith(STORE)}


def store_logic_excess(invariant: Any, variant: dict[str, Any],
                       fixed: dict[str, Any] | None) -> tuple[float, float]:
    """How much worse than the fixed store the variant did on ``invariant``
    (all of its damage when there is no fixed run), and how much of the
    variant's damage is filed under ``store_logic``, both by the invariant's
    own sense of worse. The damage a bug adds is the store's: the fixed store
    suffers the schedule's own, within the fault contract."""
    value = variant.get(invariant.metric) or 0
    baseline = (fixed or {}).get(invariant.metric) or 0
    excess = invariant.badness(value) - max(0.0, invariant.badness(baseline))
    store = invariant.causes(variant).get("store_logic", 0)
    return excess, invariant.badness(store)
