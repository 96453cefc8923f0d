"""Judging one mutant of a campaign: probe it, hunt it, classify what survives.

``judge_mutant`` is what a campaign runs per mutant, in its own process or in
a worker judging whole mutants (``simulator.mutate.campaign``); it needs only
what ``Campaign`` names, so a worker builds the rest once (the mutants'
plugin module imported, the probers' fault-free runs) and keeps it for every
mutant it judges. See ``simulator.mutate.campaign`` for what the verdicts mean.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.mutate import kinds as mutant_kinds
from simulator.mutate.lua import Mutation
from simulator.mutate.model import (
    EQUIVALENT,
    HUNG_VERDICT,
    NOT_REACHED,
    RAISED_VERDICT,
    UNDETECTED,
    WHOLLY_THE_STORE_S,
    MutantRow,
    Options,
)
from simulator.mutate.probe import Prober
from simulator.mutate.python import PythonMutation, class_source
from simulator.mutate.python_probe import HUNG, UNRUNNABLE, PythonProber
from simulator.reach.lines import Reach
from simulator.reach.python_lines import statement_line
from simulator.reach.record import class_unit, own_class, script_unit
from simulator.run.hang import Hung, bounded
from simulator.scenario.model import load_scenario
from stores import registry

if TYPE_CHECKING:
    from simulator.search.hunt import Hunt


@dataclass(frozen=True)
class Campaign:
    """What judging any of a campaign's mutants needs, in any process."""

    scenario_path: Path
    base: str
    """The unmutated kind's name."""
    plugin: str
    """The module registering the campaign's mutants as kinds."""
    plugin_dir: Path
    options: Options


@dataclass(frozen=True)
class Judgment:
    """One mutant judged: its row, and what its hunt's runs reached."""

    row: MutantRow
    reach: str | None
    """The union of its runs' reach (``Reach.encode``), None when not hunted."""
    runs: int


_PROBERS: dict[tuple[str, str], tuple[Prober | None, PythonProber | None]] = {}
"""This process's probers, per scenario and base kind: each runs the scenario
once (fault-free) when made, so a process makes them once."""


def probers(campaign: Campaign, lua: bool, python: bool
            ) -> tuple[Prober | None, PythonProber | None]:
    """The campaign's probers of Lua and of Python mutants (where asked), made once here."""
    key = (str(campaign.scenario_path), campaign.base)
    made = _PROBERS.get(key, (None, None))
    base = registry.get(campaign.base)
    if (lua and made[0] is None) or (python and made[1] is None):
        scenario = load_scenario(campaign.scenario_path)
        made = (made[0] or (Prober(base, scenario) if lua else None),
                made[1] or (PythonProber(base, scenario) if python else None))
        _PROBERS[key] = made
    return made


def judge_mutant(campaign: Campaign, number: int, name: str, mutation: Mutation) -> Judgment:
    """Probe mutant ``number`` (kind ``name``, making ``mutation``), then hunt
    it unless it cannot run: its row, classified, and its hunt's reach."""
    mutant_kinds.on_path(campaign.plugin_dir)
    registry.load_plugins([campaign.plugin])
    base = registry.get(campaign.base)
    kind = registry.get(name)
    in_python = isinstance(mutation, PythonMutation)
    prober, python_prober = probers(campaign, lua=not in_python, python=in_python)
    if isinstance(mutation, PythonMutation):
        assert python_prober is not None
        original = mutant_kinds.own_class(base, mutation.script)
        probed = python_prober.probe(name, original, mutation)
        before = class_source(original)[0]
    else:
        assert prober is not None
        probed = prober.probe(mutation, kind.scripts)
        before = base.scripts[mutation.script]
    row = MutantRow(number, name, mutation.script, mutation.line, mutation.operator,
                    mutation.label.split(" ", 1)[1], mutation.diff(before),
                    probed.outcome, probed.detail)
    if probed.outcome in UNRUNNABLE:
        row.detected, row.schedules = True, 0
        row.invariants = HUNG_VERDICT if probed.outcome == HUNG else RAISED_VERDICT
        row.store_logic_share = WHOLLY_THE_STORE_S
        return Judgment(row, None, 0)
    if probed.outcome == "stillborn":
        row.survived_as = "stillborn"
        return Judgment(row, None, 0)
    # Every mutant that compiles is hunted, under faults: the probe's
    # fault-free calls say nothing of what a lost reply or a crash runs.
    hunt = _judge(row, campaign.scenario_path, base.name, campaign.options)
    if hunt is None:
        return Judgment(row, None, 0)
    if not row.detected:
        row.reached = mutated_line_reached(base, mutation, hunt.reach)
        row.survived_as = (NOT_REACHED if not row.reached else
                           EQUIVALENT if hunt.all_same else UNDETECTED)
    return Judgment(row, None if hunt.reach is None else hunt.reach.encode(), hunt.runs)


def mutated_line_reached(base: Any, mutation: Mutation, reach: Reach | None) -> bool:
    """Whether any run of the hunt (``reach``: their union) executed the
    mutated line: for Python, the statement it is in; for Lua, the line, or
    where it holds no instruction of its own, the nearest line above that does."""
    if reach is None:
        return True  # nothing recorded: never called unreached
    if isinstance(mutation, PythonMutation):
        cls = own_class(mutant_kinds.own_class(base, mutation.script))
        unit, line = class_unit(cls), statement_line(cls, mutation.line)
    else:
        unit, line = script_unit(base, mutation.script), mutation.line
        runnable = sorted(reach.runnable.get(unit, ()))
        line = max((each for each in runnable if each <= line), default=line)
    return line in reach.reached.get(unit, frozenset())


def _judge(row: MutantRow, scenario_path: Path, base: str, options: Options) -> Hunt | None:
    """Hunt the mutant against its base kind, every run recording its reach;
    fill in what it found. The hunt, unless it hung or raised (detected)."""
    from simulator.run.compose import quiet_store_logs
    from simulator.search.hunt import REPLICA_FAULTS, Hunt

    in_process = options.scheduler is None
    bound = options.seconds * 2 + 60
    # In process (this one, or the worker judging this mutant), the whole
    # hunt is bounded from here; on a Dask cluster, each run where it runs
    # (a pool would otherwise wait for ever on a spinning one).
    hunt = Hunt(scenario_path, None, seed=options.seed, examples=options.schedules,
                time_budget_s=options.seconds, max_faults=options.max_faults,
                kinds=options.faults or REPLICA_FAULTS, swarm=options.swarm,
                reference=f"store={base}", overrides={"store": row.kind},
                workers=1 if in_process else options.workers, scheduler=options.scheduler,
                run_bound_s=None if in_process else bound, coverage=True)
    started = time.perf_counter()
    try:
        with quiet_store_logs(), (bounded(bound) if in_process else nullcontext()):
            found = hunt.search()
    except Hung:
        row.seconds = round(time.perf_counter() - started, 2)
        row.detected, row.invariants, row.schedules = True, HUNG_VERDICT, hunt.runs - 1
        row.store_logic_share = WHOLLY_THE_STORE_S
        return None
    except Exception as error:  # noqa: BLE001 -- only the mutant changed: its store broke a run
        row.seconds = round(time.perf_counter() - started, 2)
        row.detected, row.invariants, row.schedules = True, RAISED_VERDICT, hunt.runs - 1
        row.verdict = f"a run stopped on {type(error).__name__}: {error}"
        row.store_logic_share = WHOLLY_THE_STORE_S
        return None
    row.seconds = round(time.perf_counter() - started, 2)
    if found is None:
        row.schedules = hunt.runs - 1
        return hunt
    row.detected = True
    row.schedules = found.schedules
    row.verdict = str(found.verdict)
    worse = found.verdict.worse
    if found.verdict.raised is not None and not worse:
        row.invariants, row.store_logic_share = RAISED_VERDICT, WHOLLY_THE_STORE_S
        return hunt
    row.invariants = ", ".join(item.metric for item in worse)
    summary = found.result.summary
    shares = [item.store_share for item in worse if item.store_share is not None]
    row.store_logic_share = round(max(shares), 4) if shares else None
    row.exposed_by = "; ".join(dict.fromkeys(
        str(summary[f"{item.metric}_exposed_by"]) for item in worse
        if summary.get(f"{item.metric}_exposed_by")))
    return hunt
