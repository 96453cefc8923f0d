"""Reconfiguration mutants: stores that ignore an operator's configuration change.

Each module is a plug-in: importing it registers one store kind,
``mutants.reconfigure.<module>``, a shipped store with one bug that only an
operator's ``reconfigure`` exposes (a quiet run, or any fault of the
network's, leaves it as sound as the fixed store), and defines ``MUTANT``:
the fixed kind it is derived from, what it breaks, the hunt scenario it is
shown on and the reconfiguration that exposes it.
``tests/simulator/test_reconfigure.py`` runs each one: its damage is
``store_logic``, exposed by ``config_change on reconfigure``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stores.registry import load_plugins

SCENARIOS = Path(__file__).resolve().parents[3] / "data" / "scenarios" / "hunt"

CATALOGUE = ("cap_pinned_by_first_boot", "limit_pinned_by_first_boot",
             "ttl_pinned_by_first_boot")
"""Every reconfiguration mutant module."""


@dataclass(frozen=True)
class ReconfigureMutant:
    """One reconfiguration mutant: its bug and the change that exposes it."""

    name: str
    derived_from: str
    breaks: str
    scenario: str
    """The hunt scenario (``data/scenarios/hunt``) it is shown on."""
    reconfigure: dict[str, Any]
    """The ``reconfigure`` entry that exposes it, as a ``[[faults.schedule]]`` entry."""
    damage: tuple[str, ...]
    """The metrics whose ``store_logic`` part it must move."""
    also: tuple[dict[str, Any], ...] = ()
    """Faults of the lab's beside the change, when the damage needs one to
    show (a crash stranding holds): alone they expose nothing."""

    @property
    def schedule(self) -> list[dict[str, Any]]:
        """The change and the faults beside it, in time order."""
        return sorted([self.reconfigure, *self.also], key=lambda entry: int(
            entry["at"].removesuffix("ms")))

    @property
    def kind(self) -> str:
        return f"mutants.reconfigure.{self.name}"

    @property
    def path(self) -> Path:
        return SCENARIOS / self.scenario


def catalogue() -> list[ReconfigureMutant]:
    """Every reconfiguration mutant, its module loaded as a plug-in."""
    modules = load_plugins(f"{__name__}.{name}" for name in CATALOGUE)
    return [sys.modules[module].MUTANT for module in modules]
