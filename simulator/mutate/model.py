"""What a mutation campaign is asked and what it finds, row by row: its
options, the table's row, and the words of its verdicts and survivor classes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.mutate.lua import OPERATORS as LUA_OPERATORS
from simulator.mutate.python import OPERATORS as PYTHON_OPERATORS

OPERATORS = tuple(dict.fromkeys(LUA_OPERATORS + PYTHON_OPERATORS))
"""Every operator class, Lua's then those only Python has."""
CODE = ("lua", "python")
"""What a campaign can mutate: the kind's Lua scripts, its own Python classes."""
HUNG_VERDICT = "the store hung"
"""What detected a mutant whose run never gave the simulation back."""
RAISED_VERDICT = "the store raised"
"""What detected a mutant whose store raised out of a run (``STORE_RAISED``'s words)."""
WHOLLY_THE_STORE_S = 1.0
"""The store_logic share of a mutant whose store raised or hung: only the
store changed, so all of it is the store's (the verdict blames it whole)."""
NOT_REACHED, EQUIVALENT, UNDETECTED = "not reached", "equivalent", "undetected"
SURVIVOR_CLASSES = ("stillborn", NOT_REACHED, EQUIVALENT, UNDETECTED)
"""Why a mutant survived its hunt: it does not compile; no run of its hunt
executed the mutated line (the scenario's gap); every run gave the base's
trace, replies and keys (equivalent, or runs too plain to tell); or it
differed and no invariant caught it (the lab's own miss)."""


@dataclass(frozen=True)
class Options:
    """How a campaign searches each mutant."""

    operators: tuple[str, ...] = OPERATORS
    code: tuple[str, ...] = CODE
    """What to mutate: ``lua`` (the kind's scripts), ``python`` (its own classes)."""
    schedules: int = 50
    """The hunt's schedules per mutant (besides the fault-free run)."""
    seconds: float = 120.0
    """A mutant's wall-time cap, search and shrinking."""
    faults: tuple[str, ...] | None = None
    """Fault kinds the hunts draw (None: the hunt's default; ``("all",)``:
    every kind the scenario can take)."""
    swarm: bool = False
    """Each schedule draws its faults from a random subset of ``faults``."""
    max_faults: int = 3
    seed: int = 1
    workers: int = 1
    """Mutants judged at once, each in a process of its own (with
    ``scheduler``: the Dask cluster's share each hunt may use)."""
    scheduler: str | None = None

    def identity(self) -> dict[str, Any]:
        """What the campaign's results depend on (not where they are computed)."""
        return {name: value for name, value in asdict(self).items()
                if name not in ("workers", "scheduler")}

    @classmethod
    def of(cls, identity: dict[str, Any], workers: int = 1,
           scheduler: str | None = None) -> Options:
        """The options ``identity`` describes (a journal's), run with ``workers``."""
        tupled = {name: tuple(value) if isinstance(value, list) else value
                  for name, value in identity.items()}
        return cls(**tupled, workers=workers, scheduler=scheduler)


@dataclass
class MutantRow:
    """One row of the campaign's table."""

    number: int
    kind: str
    script: str
    line: int
    operator: str
    change: str
    diff: str
    probe: str
    probe_detail: str
    detected: bool = False
    invariants: str = ""
    schedules: int | None = None
    seconds: float = 0.0
    store_logic_share: float | None = None
    exposed_by: str = ""
    reached: bool | None = None
    """Whether a run of its hunt executed the mutated line (None: not hunted)."""
    survived_as: str = ""
    verdict: str = field(default="", repr=False)


def as_records(rows: Sequence[MutantRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]
