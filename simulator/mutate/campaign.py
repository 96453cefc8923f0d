"""A mutation campaign: generate mutants of a scenario's store kind, probe
each, judge the ones that differ, and tell how many the lab caught.

Judging a mutant is what the lab does for any store: the scenario without
faults, then ``hunt --reference BASE`` within a budget of schedules (and a
wall-time cap); a mutant is detected when a schedule (the fault-free one
included) makes it worse than the unmutated kind on one of the family's
invariants beyond the noise margin, or makes it raise. For each detected
mutant the table keeps which invariants, after how many schedules and
seconds, how much of its added damage the oracle filed under ``store_logic``,
and the fault that exposed it. A survivor is classified by its probe
(``simulator.mutate.probe``): stillborn, not run by the scenario, equivalent
on the scenario's calls, or exercised yet undetected -- the last is the lab's
own gap, the one before it the scenario's.

Deterministic: the mutants, their order and their verdicts depend only on
the scenario, its seed and the options (hunts are, with any number of
workers).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simulator.mutate import kinds as mutant_kinds
from simulator.mutate.lua import OPERATORS as LUA_OPERATORS
from simulator.mutate.lua import Mutation
from simulator.mutate.lua import mutations as lua_mutations
from simulator.mutate.probe import Prober
from simulator.mutate.python import OPERATORS as PYTHON_OPERATORS
from simulator.mutate.python import PythonMutation, class_source
from simulator.mutate.python import mutations as python_mutations
from simulator.mutate.python_probe import HUNG, UNRUNNABLE, PythonProber
from simulator.run.hang import Hung, bounded
from simulator.scenario.model import Scenario, load_scenario
from stores import registry

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
SURVIVOR_CLASSES = ("stillborn", "not run", "equivalent", "undetected")
"""Why a mutant survived, from the probe's verdict to the lab's own miss."""


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
    """Fault kinds the hunts draw (None: the hunt's default)."""
    max_faults: int = 3
    seed: int = 1
    workers: int = 1
    scheduler: str | None = None


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
    survived_as: str = ""
    verdict: str = field(default="", repr=False)


def generate(base: Any, operators: Sequence[str], code: Sequence[str] = CODE
             ) -> list[Mutation]:
    """Every mutation of ``base``'s scripts, script by script in name order,
    then of its own classes, class by class in its order (``code`` says which)."""
    found: list[Mutation] = []
    if "lua" in code and base.with_scripts is not None:
        lua_operators = tuple(name for name in operators if name in LUA_OPERATORS)
        found += [mutation for name in sorted(base.scripts)
                  for mutation in lua_mutations(name, base.scripts[name], lua_operators)]
    if "python" in code and base.with_classes is not None:
        python_operators = tuple(name for name in operators if name in PYTHON_OPERATORS)
        found += [mutation for cls in base.classes
                  for mutation in python_mutations(cls, python_operators)]
    return found


def run_campaign(scenario_path: Path, options: Options, out_dir: Path,
                 echo: Callable[[str], None] = print) -> list[MutantRow]:
    """Generate, probe and judge every mutant of ``scenario_path``'s store kind."""
    scenario = load_scenario(scenario_path)
    base = registry.get(scenario.store)
    found = generate(base, options.operators, options.code)
    if not found:
        raise ValueError(f"mutate: {base.name} has nothing to mutate in "
                         f"{' or '.join(options.code)} with {', '.join(options.operators)} "
                         f"(its Lua: {', '.join(sorted(base.scripts)) or 'none'}; its classes: "
                         f"{', '.join(cls.__name__ for cls in base.classes) or 'none'})")
    named = [(mutant_kinds.mutant_name(base.name, mutation), mutation) for mutation in found]
    mutant_kinds.write_plugin(out_dir, base.name, named)
    in_python = [isinstance(mutation, PythonMutation) for mutation in found]
    prober = Prober(base, scenario) if not all(in_python) else None
    python_prober = PythonProber(base, scenario) if any(in_python) else None
    sent = ("" if prober is None else f"; the scenario's fault-free run sent "
            f"{len(prober.calls)} script call(s) to probe with")
    echo(f"mutate: {len(named)} mutant(s) of {base.name} ({', '.join(options.operators)}){sent}")
    rows = []
    for number, (name, mutation) in enumerate(named, start=1):
        kind = registry.get(name)
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
        elif probed.judged:
            _judge(row, scenario_path, scenario, base.name, options)
        row.survived_as = "" if row.detected else (
            probed.outcome if probed.outcome != "differs" else "undetected")
        rows.append(row)
        echo(_line(row))
    return rows


def _judge(row: MutantRow, scenario_path: Path, scenario: Scenario, base: str,
           options: Options) -> None:
    """Hunt the mutant against its base kind; fill in what it found."""
    from simulator.run.compose import quiet_store_logs
    from simulator.search.hunt import REPLICA_FAULTS, Hunt

    in_process = options.workers == 1 and options.scheduler is None
    bound = options.seconds * 2 + 60
    # In process, the whole hunt is bounded from here; in workers, each run
    # where it runs (a pool would otherwise wait for ever on a spinning one).
    hunt = Hunt(scenario_path, None, seed=options.seed, examples=options.schedules,
                time_budget_s=options.seconds, max_faults=options.max_faults,
                kinds=options.faults or REPLICA_FAULTS, reference=f"store={base}",
                overrides={"store": row.kind}, workers=options.workers,
                scheduler=options.scheduler, run_bound_s=None if in_process else bound)
    started = time.perf_counter()
    try:
        with quiet_store_logs(), (bounded(bound) if in_process else nullcontext()):
            found = hunt.search()
    except Hung:
        row.seconds = round(time.perf_counter() - started, 2)
        row.detected, row.invariants, row.schedules = True, HUNG_VERDICT, hunt.runs - 1
        row.store_logic_share = WHOLLY_THE_STORE_S
        return
    except Exception as error:  # noqa: BLE001 -- only the mutant changed: its store broke a run
        row.seconds = round(time.perf_counter() - started, 2)
        row.detected, row.invariants, row.schedules = True, RAISED_VERDICT, hunt.runs - 1
        row.verdict = f"a run stopped on {type(error).__name__}: {error}"
        row.store_logic_share = WHOLLY_THE_STORE_S
        return
    row.seconds = round(time.perf_counter() - started, 2)
    if found is None:
        row.schedules = hunt.runs - 1
        return
    row.detected = True
    row.schedules = found.schedules
    row.verdict = str(found.verdict)
    worse = found.verdict.worse
    if found.verdict.raised is not None and not worse:
        row.invariants, row.store_logic_share = RAISED_VERDICT, WHOLLY_THE_STORE_S
        return
    row.invariants = ", ".join(item.metric for item in worse)
    summary = found.result.summary
    shares = [item.store_share for item in worse if item.store_share is not None]
    row.store_logic_share = round(max(shares), 4) if shares else None
    row.exposed_by = "; ".join(dict.fromkeys(
        str(summary[f"{item.metric}_exposed_by"]) for item in worse
        if summary.get(f"{item.metric}_exposed_by")))


def _line(row: MutantRow) -> str:
    head = f"  {row.number:>4} {row.script}:{row.line} {row.change}"
    if row.detected:
        share = ("" if row.store_logic_share is None
                 else f", store_logic {row.store_logic_share:.0%}")
        return (f"{head}: detected after {row.schedules} schedule(s), {row.seconds:.1f} s, "
                f"by {row.invariants}{share}")
    return f"{head}: survived ({row.survived_as}: {row.probe_detail})"


def as_records(rows: Sequence[MutantRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]
