"""``python -m simulator bench --rediscovery``: the lab's power, measured as
whether ``hunt`` finds every historical variant of a family by itself.

Each family has one plain scenario under ``data/scenarios/hunt/`` -- a
deployment as it would run, written without any variant in mind, naming the
family's fixed store (and, for the budget family, a migration the operator
may run to the fixed v2 layout) -- and a plan, ``data/rediscovery/FAMILY.toml``:
the hunt's options, the same for every variant of the family, and where each
variant goes. For each variant the hunt puts the variant at its place
(``--set AT=VARIANT``), compares it with the kind the plain scenario names
there (``--reference AT=FIXED``), and searches at most ``schedules``
schedules. A variant is rediscovered when the hunt finds a schedule on which
it does worse than the fixed store beyond the noise margin; the line says
after how many schedules (0: the fault-free run already shows it), with how
many faults once shrunk, in how much wall time, and the verdict.

A rediscovery takes about an hour and a quarter, so each variant's result is
journalled as it is found (``simulator.sweeps.journal``; ``--out DIR``, by
default ``data/results/rediscovery/FAMILIES``), and ``bench --resume DIR``
goes on with one a kill or a stop interrupted, hunting only what it lacks.

A plan must name every variant its family registers, so a new variant without
a plan entry is a test failure, not a silent gap
(``tests/simulator/test_rediscovery.py``, which also runs the variants a plan
marks ``quick``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from simulator.scenario.faults import MAX_SHARDS
from simulator.scenario.model import read_toml
from simulator.scenario.stand_in import stood_for
from simulator.sweeps.journal import Journal
from simulator.sweeps.plans import family_plans
from simulator.sweeps.plans import load_plan as read_plan
from simulator.sweeps.progress import ItemProgress
from stores import registry
from stores.quantities import parse_duration_us

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "data" / "rediscovery"
RESULTS = Path("data") / "results" / "rediscovery"
"""Where a rediscovery's journal goes by default (from the working directory)."""
COMMAND = "bench --rediscovery"
"""The command a rediscovery's journal belongs to."""
SCHEDULE_BOUND = 400
"""The issue's bound: each variant found within this many schedules."""


class PlannedVariant(BaseModel):
    """One variant to rediscover, and the scenario place it goes."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    at: str = "store"
    quick: bool = False
    """In the test suite's fast subset."""
    cluster_shards: int | None = Field(None, ge=1, le=MAX_SHARDS)
    """Hunted on a simulated cluster of this many shards (the plain scenario
    with ``server.cluster``, the reference store on it too): a variant that
    breaks only on a cluster."""

    @property
    def overrides(self) -> dict[str, Any]:
        """What the hunt sets in the plain scenario, for the variant and its reference."""
        on_cluster = ({} if self.cluster_shards is None
                      else {"server.cluster.shards": self.cluster_shards})
        return {**on_cluster, self.at: self.kind}


class Plan(BaseModel):
    """How one family's variants are hunted from its plain scenario."""

    model_config = ConfigDict(extra="forbid")
    family: str = ""
    """From the plan's file name."""
    scenario: Path
    """From the repository's root."""
    faults: tuple[str, ...]
    max_faults: int = Field(ge=0, le=10)
    schedules: int = Field(ge=1, le=SCHEDULE_BOUND)
    seed: int = 1
    budget: str = "10m"
    variants: tuple[PlannedVariant, ...]

    @field_validator("budget")
    @classmethod
    def _a_duration(cls, budget: str) -> str:
        parse_duration_us(budget)
        return budget

    @property
    def budget_s(self) -> float:
        return parse_duration_us(self.budget) / 1e6

    @property
    def scenario_path(self) -> Path:
        return ROOT / self.scenario


def load_plan(path: Path) -> Plan:
    """The plan in ``path`` (``FAMILY.toml``); one clear line when it is not one."""
    return read_plan(path, Plan, "rediscovery plan")


def plans(families: Sequence[str] = ()) -> list[Plan]:
    """The committed plans, of ``families`` (all when empty), by family name."""
    return family_plans(PLANS, families, Plan, "--rediscovery", "rediscovery plan")


def family_variants(family: str) -> list[str]:
    """Every variant kind the family registers: what its plan must name."""
    return sorted(name for name in registry.kinds() if name.startswith(f"{family}.variants."))


def fixed_kind(plan: Plan, variant: PlannedVariant) -> str:
    """The kind the plain scenario names where ``variant`` goes: its reference."""
    return stood_for(read_toml(plan.scenario_path), f"{variant.at}={variant.kind}")[0]


@dataclass(frozen=True)
class Rediscovered:
    """What one variant's hunt found."""

    kind: str
    found: bool
    schedules: int
    """Schedules the search judged up to the first that broke (0: the
    fault-free run broke), or all it judged when none did."""
    faults: int
    """Faults in the shrunk schedule (0 when not found)."""
    seconds: float
    verdict: str
    store_share: float | None = None
    """The largest share of the damage over the fixed store that the fault
    contracts file as the variant's own (``store_logic``); None where the
    invariants it broke are filed by no cause."""

    @property
    def line(self) -> str:
        name = self.kind.split(".variants.", 1)[-1]
        if not self.found:
            return (f"  {name:<34} NOT FOUND in {self.schedules} schedule(s), "
                    f"{self.seconds:.0f} s")
        blamed = ("" if self.store_share is None
                  else f", {self.store_share:.0%} of it store_logic")
        return (f"  {name:<34} found after {self.schedules:>3} schedule(s), "
                f"{self.faults} fault(s) once shrunk, {self.seconds:5.1f} s{blamed}: "
                f"{self.verdict}")


def rediscover(plan: Plan, variant: PlannedVariant, workers: int = 1) -> Rediscovered:
    """Hunt ``variant`` from its family's plain scenario, as the plan says."""
    from simulator.run.compose import quiet_store_logs
    from simulator.search.hunt import Hunt

    hunt = Hunt(plan.scenario_path, None, seed=plan.seed, examples=plan.schedules,
                time_budget_s=plan.budget_s, max_faults=plan.max_faults, kinds=plan.faults,
                reference=f"{variant.at}={fixed_kind(plan, variant)}",
                overrides=variant.overrides, workers=workers)
    started = time.perf_counter()
    with quiet_store_logs():
        found = hunt.search()
    seconds = time.perf_counter() - started
    if found is None:
        return Rediscovered(variant.kind, False, hunt.runs - 1, 0, seconds, "")
    shares = [worse.store_share for worse in found.verdict.worse
              if worse.store_share is not None]
    return Rediscovered(variant.kind, True, found.schedules, len(found.schedule), seconds,
                        str(found.verdict), max(shares) if shares else None)


def run_rediscovery(families: Sequence[str] = (), workers: int = 1,
                    echo: Callable[[str], None] = print, out_dir: Path | None = None,
                    resume: bool = False, live: bool | None = None) -> list[Rediscovered]:
    """Rediscover every variant of ``families`` (all planned ones when empty),
    ``echo``-ing a line per variant and a total per family and overall. Each
    variant's result is journalled in ``out_dir`` as it is found (default:
    ``data/results/rediscovery/FAMILIES``); ``resume``: go on from the journal
    there, hunting only the variants it lacks. ``live``: one updating
    progress line (default: on a terminal), else a plain line per variant."""
    if resume:
        if out_dir is None:
            raise ValueError("--resume: give the directory of the rediscovery to go on with")
        journal = Journal.resume(out_dir, COMMAND)
        planned = plans(journal.job["families"])
        _same_plans(journal, planned, out_dir)
    else:
        planned = plans(families)
        out_dir = out_dir or RESULTS / ("-".join(families) or "all")
        journal = Journal.start(out_dir, _job(planned))
    kept = {(record["family"], record["kind"]): Rediscovered(**record["result"])
            for record in journal.records}
    progress = ItemProgress(sum(len(plan.variants) for plan in planned), "rediscovery",
                            done=len(kept), found=sum(each.found for each in kept.values()),
                            echo=echo, live=live, unit="variant")
    everything: list[Rediscovered] = []
    try:
        for plan in planned:
            echo(f"{plan.family}: from {plan.scenario} (faults {','.join(plan.faults)}, "
                 f"at most {plan.max_faults} fault(s), {plan.schedules} schedules, "
                 f"seed {plan.seed})")
            results = []
            for variant in plan.variants:
                result = kept.get((plan.family, variant.kind))
                if result is not None:
                    echo(f"{result.line} (kept from before)")
                else:
                    progress.judging([variant.kind.split(".variants.", 1)[-1]])
                    result = rediscover(plan, variant, workers)
                    journal.append({"family": plan.family, "kind": variant.kind,
                                    "result": asdict(result)})
                    progress.item(result.line, result.found)
                results.append(result)
            echo(total_line(plan.family, results))
            everything.extend(results)
    except KeyboardInterrupt as stop:
        stop.add_note(f"{len(journal.records)} variant(s) found or not, kept in {journal.path}: "
                      f"go on with bench --resume {out_dir}")
        raise
    finally:
        progress.close()
    if len(planned) > 1:
        echo(total_line("all families", everything))
    return everything


def _job(planned: Sequence[Plan]) -> dict[str, Any]:
    """What a rediscovery's results depend on: the families and their plans."""
    return {"command": COMMAND, "families": [plan.family for plan in planned],
            "plans": [plan.model_dump(mode="json") for plan in planned]}


def _same_plans(journal: Journal, planned: Sequence[Plan], out_dir: Path) -> None:
    if journal.job["plans"] != _job(planned)["plans"]:
        raise ValueError(f"--resume: the rediscovery plans changed since the one in {out_dir} "
                         f"began (data/rediscovery/); start it again in a new directory")


def total_line(what: str, results: Sequence[Rediscovered]) -> str:
    """``found/total``, the schedules it took (median, most) and the wall time."""
    found = [result for result in results if result.found]
    schedules = [result.schedules for result in found]
    taken = (f", schedules median {statistics.median(schedules):g}, most {max(schedules)}"
             if schedules else "")
    return (f"{what}: {len(found)}/{len(results)} found{taken}, "
            f"{sum(result.seconds for result in results):.0f} s in all")
