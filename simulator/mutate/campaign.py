"""A mutation campaign: generate mutants of a scenario's store kind, hunt
every one that compiles, and tell how many the lab caught.

Judging a mutant is what the lab does for any store: the scenario without
faults, then ``hunt --reference BASE`` within a budget of schedules (and a
wall-time cap); a mutant is detected when a schedule (the fault-free one
included) makes it worse than the unmutated kind on one of the family's
invariants beyond the noise margin, or makes it raise. For each detected
mutant the table keeps which invariants, after how many schedules and
seconds, how much of its added damage the oracle filed under ``store_logic``,
and the fault that exposed it. A survivor is classified by its hunt, whose
every run records its reach (``simulator.reach``): stillborn (it does not
compile: the probe, ``simulator.mutate.probe``, says so without a hunt), not
reached (no run executed the mutated line: the scenario's gap), equivalent
(every run had the base's trace, replies and keys), or undetected (it
differed and no invariant caught it: the lab's own gap). The probe's
fault-free finding stays in the table beside it: it no longer decides what
is hunted, since what a fault exposes the fault-free calls never show.

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
from typing import TYPE_CHECKING, Any

from simulator.mutate import kinds as mutant_kinds
from simulator.mutate.lua import OPERATORS as LUA_OPERATORS
from simulator.mutate.lua import Mutation
from simulator.mutate.lua import mutations as lua_mutations
from simulator.mutate.probe import Prober
from simulator.mutate.python import OPERATORS as PYTHON_OPERATORS
from simulator.mutate.python import PythonMutation, class_source
from simulator.mutate.python import mutations as python_mutations
from simulator.mutate.python_probe import HUNG, UNRUNNABLE, PythonProber
from simulator.reach.lines import Reach
from simulator.reach.python_lines import statement_line
from simulator.reach.record import class_unit, own_class, script_unit
from simulator.run.hang import Hung, bounded
from simulator.scenario.model import load_scenario
from stores import registry

if TYPE_CHECKING:
    from simulator.search.hunt import Hunt

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
    reached: bool | None = None
    """Whether a run of its hunt executed the mutated line (None: not hunted)."""
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
    reached = Reach()  # the union over every hunt's runs
    runs = 0
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
        elif probed.outcome == "stillborn":
            row.survived_as = "stillborn"
        else:
            # Every mutant that compiles is hunted, under faults: the probe's
            # fault-free calls say nothing of what a lost reply or a crash runs.
            hunt = _judge(row, scenario_path, base.name, options)
            if hunt is not None and hunt.reach is not None:
                reached, runs = reached.union(hunt.reach), runs + hunt.runs
            if hunt is not None and not row.detected:
                row.reached = mutated_line_reached(base, mutation, hunt.reach)
                row.survived_as = (NOT_REACHED if not row.reached else
                                   EQUIVALENT if hunt.all_same else UNDETECTED)
        rows.append(row)
        echo(_line(row))
    if runs:
        echo(f"mutate: over the campaign's {runs} run(s) (of its mutants), "
             f"{reached.account()}")
    return rows


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

    in_process = options.workers == 1 and options.scheduler is None
    bound = options.seconds * 2 + 60
    # In process, the whole hunt is bounded from here; in workers, each run
    # where it runs (a pool would otherwise wait for ever on a spinning one).
    hunt = Hunt(scenario_path, None, seed=options.seed, examples=options.schedules,
                time_budget_s=options.seconds, max_faults=options.max_faults,
                kinds=options.faults or REPLICA_FAULTS, swarm=options.swarm,
                reference=f"store={base}",
                overrides={"store": row.kind}, workers=options.workers,
                scheduler=options.scheduler, run_bound_s=None if in_process else bound,
                coverage=True)
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


def _line(row: MutantRow) -> str:
    head = f"  {row.number:>4} {row.script}:{row.line} {row.change}"
    if row.detected:
        share = ("" if row.store_logic_share is None
                 else f", store_logic {row.store_logic_share:.0%}")
        return (f"{head}: detected after {row.schedules} schedule(s), {row.seconds:.1f} s, "
                f"by {row.invariants}{share}")
    if row.survived_as == "stillborn":
        return f"{head}: survived (stillborn: {row.probe_detail})"
    return (f"{head}: survived ({row.survived_as} over {row.schedules} schedule(s); "
            f"fault-free probe: {row.probe})")


def as_records(rows: Sequence[MutantRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]
