"""``python -m simulator bench --power``: the lab's power over each family,
as mutation campaigns measure it, against the targets of issue 40.

Each family has a plan, ``data/power/FAMILY.toml``: the per-mutant budget
(``schedules``, ``budget``, the hunts' ``seed``) and its campaigns, one
scenario each (a kind of the family, run as a deployment runs it, written for
the campaign and not for one mutant). Each campaign is ``mutate SCENARIO``
with those options and the default faults (every kind the scenario can take,
swarm-style), into ``data/results/power/SCENARIO-NAME`` (``--out`` moves
the root); a campaign whose journal is there already goes on from it (a
night's measurement survives a kill: run the command again).

Per family, over its campaigns (a mutant judged in two campaigns of one
kind counts once: detected if either detected it, ``merged``):

* **lines reached** — the store lines any run of any hunt executed, of those
  that can run (the union of the campaigns' reach); target >= 95%;
* **not reached** — mutants no run of their hunt reached, of those that
  compile; target <= 5%;
* **kill rate** — detected of judged (compiling, reached, not equivalent);
  target >= 90%;
* **blamed** — detections whose store_logic share is >= 95%, of all
  detections; target >= 95%.

Each campaign's page (``mutants.html``) lists every survivor by class, with
what each asks of the reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from simulator.mutate.campaign import (
    CODE,
    EQUIVALENT,
    NOT_REACHED,
    OPERATORS,
    UNDETECTED,
    MutantRow,
    Options,
    campaign_reach,
    run_campaign,
)
from simulator.mutate.table import compiling, judged, summary_line, write_tables
from simulator.reach.lines import Reach
from simulator.scenario.model import load_scenario
from simulator.sweeps.journal import JOURNAL, Journal
from simulator.sweeps.plans import family_plans
from stores.quantities import parse_duration_us

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "data" / "power"
RESULTS = Path("data") / "results" / "power"
"""Where the campaigns go by default (from the working directory)."""
LINES_TARGET = 0.95
NOT_REACHED_TARGET = 0.05
KILL_RATE_TARGET = 0.90
BLAMED_TARGET = 0.95
BLAMED_SHARE = 0.95
"""A detection is blamed on the store when at least this share of its added
damage is filed under store_logic."""


class Campaign(BaseModel):
    """One campaign of a family's plan."""

    model_config = ConfigDict(extra="forbid")
    scenario: Path
    """From the repository's root."""
    code: tuple[str, ...] = CODE
    """What it mutates: the kind's Lua scripts, its own Python classes."""
    operators: tuple[str, ...] = OPERATORS
    faults: tuple[str, ...] = ("all",)
    """The fault kinds its hunts draw, swarm-style (``all``: every kind the
    scenario can take)."""

    @field_validator("code")
    @classmethod
    def _known_code(cls, code: tuple[str, ...]) -> tuple[str, ...]:
        if not code or set(code) - set(CODE):
            raise ValueError(f"code: some of {', '.join(CODE)}, got {list(code)}")
        return code

    @field_validator("faults")
    @classmethod
    def _known_faults(cls, faults: tuple[str, ...]) -> tuple[str, ...]:
        from simulator.search.strategies import ALL_FAULTS, EVERY_KIND
        if faults != EVERY_KIND and (not faults or set(faults) - set(ALL_FAULTS)):
            raise ValueError(f"faults: all, or some of {', '.join(ALL_FAULTS)}; "
                             f"got {list(faults)}")
        return faults

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, operators: tuple[str, ...]) -> tuple[str, ...]:
        if not operators or set(operators) - set(OPERATORS):
            raise ValueError(f"operators: some of {', '.join(OPERATORS)}, got {list(operators)}")
        return operators


class PowerPlan(BaseModel):
    """How one family's power is measured."""

    model_config = ConfigDict(extra="forbid")
    family: str = ""
    """From the plan's file name."""
    schedules: int = Field(ge=0, le=400)
    budget: str
    seed: int = 1
    campaigns: tuple[Campaign, ...] = Field(min_length=1)

    @field_validator("budget")
    @classmethod
    def _a_duration(cls, budget: str) -> str:
        parse_duration_us(budget)
        return budget

    def options(self, campaign: Campaign, workers: int) -> Options:
        return Options(operators=campaign.operators, code=campaign.code,
                       schedules=self.schedules, seconds=parse_duration_us(self.budget) / 1e6,
                       faults=campaign.faults, swarm=True, seed=self.seed, workers=workers)


def power_plans(families: Sequence[str] = ()) -> list[PowerPlan]:
    """The committed plans of ``families`` (all when empty), by family name."""
    return family_plans(PLANS, families, PowerPlan, "--power", "power plan")


@dataclass(frozen=True)
class Power:
    """What a family's campaigns found, against the targets."""

    family: str
    rows: list[MutantRow]
    reach: Reach

    @property
    def figures(self) -> list[tuple[str, int, int, float, bool]]:
        """``(what, count, of, share, met)`` per target."""
        compiled = compiling(self.rows)
        not_reached = [row for row in compiled if row.survived_as == NOT_REACHED]
        candidates = judged(self.rows)
        detected = [row for row in self.rows if row.detected]
        blamed = [row for row in detected if (row.store_logic_share or 0) >= BLAMED_SHARE]

        def share(count: int, of: int) -> float:
            return count / of if of else 0.0

        lines = share(self.reach.count, self.reach.total)
        missed = share(len(not_reached), len(compiled))
        rate = share(len(detected), len(candidates))
        blame = share(len(blamed), len(detected))
        return [("lines reached", self.reach.count, self.reach.total, lines,
                 lines >= LINES_TARGET),
                ("not reached", len(not_reached), len(compiled), missed,
                 missed <= NOT_REACHED_TARGET),
                ("kill rate", len(detected), len(candidates), rate, rate >= KILL_RATE_TARGET),
                ("blamed", len(blamed), len(detected), blame, blame >= BLAMED_TARGET)]

    @property
    def line(self) -> str:
        targets = {"lines reached": f">= {LINES_TARGET:.0%}",
                   "not reached": f"<= {NOT_REACHED_TARGET:.0%}",
                   "kill rate": f">= {KILL_RATE_TARGET:.0%}",
                   "blamed": f">= {BLAMED_TARGET:.0%}"}
        parts = [f"{what} {count} of {of} ({share:.0%}; target {targets[what]}"
                 f"{'' if met else ': SHORT'})"
                 for what, count, of, share, met in self.figures]
        return f"{self.family}: " + "; ".join(parts)


def run_power(families: Sequence[str] = (), workers: int = 1, out_root: Path | None = None,
              echo: Callable[[str], None] = print) -> list[Power]:
    """Run (or go on with) every campaign of ``families``' plans; a line per
    family against the targets."""
    root = out_root or RESULTS
    powers = []
    for plan in power_plans(families):
        echo(f"power: {plan.family}: {len(plan.campaigns)} campaign(s), --schedules "
             f"{plan.schedules} --budget {plan.budget} --seed {plan.seed}, every fault kind "
             f"swarm-style")
        rows: list[MutantRow] = []
        reach = Reach()
        for campaign in plan.campaigns:
            scenario = ROOT / campaign.scenario
            out = root / load_scenario(scenario).name
            found = _campaign(scenario, plan.options(campaign, workers), out, echo)
            write_tables(found, out)
            echo(f"  {summary_line(found)}; page: {out / 'mutants.html'}")
            rows += found
            reach = reach.union(campaign_reach(Journal.resume(out, "mutate").records)[0])
        powers.append(Power(plan.family, merged(rows), reach))
        echo(powers[-1].line)
    return powers


SURVIVED_ORDER = (UNDETECTED, EQUIVALENT, NOT_REACHED, "stillborn")
"""Of a mutant's survivals in several campaigns, the one that counts: reached
and different beats reached and alike, which beats never reached."""


def merged(rows: Sequence[MutantRow]) -> list[MutantRow]:
    """One row per mutant (its kind's name: the same change has the same name
    in every campaign) of a family's campaigns: detected where any campaign
    detected it; else its survival in the campaign that got furthest."""
    best: dict[str, MutantRow] = {}
    for row in rows:
        kept = best.get(row.kind)
        if kept is None or _rank(row) < _rank(kept):
            best[row.kind] = row
    return list(best.values())


def _rank(row: MutantRow) -> int:
    if row.detected:
        return -1
    return SURVIVED_ORDER.index(row.survived_as) if row.survived_as in SURVIVED_ORDER else 0


def _campaign(scenario: Path, options: Options, out: Path,
              echo: Callable[[str], None]) -> list[MutantRow]:
    """The campaign in ``out``: gone on with when its journal is this one's,
    else begun."""
    if (out / JOURNAL).exists():
        try:
            return run_campaign(scenario, options, out, echo=echo, resume=True)
        except ValueError as error:
            echo(f"  {error}: beginning it again")
    return run_campaign(scenario, options, out, echo=echo)
