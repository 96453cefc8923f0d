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
