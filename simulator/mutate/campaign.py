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
the scenario, its seed and the options, with any number of workers (each
judges whole mutants, one at a time, as the campaign's own process would).

A campaign keeps a journal in its output directory (``simulator.sweeps.journal``):
each mutant's row, and its hunt's reach, written as it is judged; a killed
campaign resumes from it (``resume=True``, ``mutate --resume DIR``) to the
table an uninterrupted one gives.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families import SHIPPED
from simulator.mutate import kinds as mutant_kinds
from simulator.mutate.judging import (
    Campaign,
    Judgment,
    judge_mutant,
    mutated_line_reached,
    probers,
)
from simulator.mutate.lua import OPERATORS as LUA_OPERATORS
from simulator.mutate.lua import Mutation
from simulator.mutate.lua import mutations as lua_mutations
from simulator.mutate.model import (
    CODE,
    EQUIVALENT,
    HUNG_VERDICT,
    NOT_REACHED,
    OPERATORS,
    RAISED_VERDICT,
    SURVIVOR_CLASSES,
    UNDETECTED,
    MutantRow,
    Options,
    as_records,
)
from simulator.mutate.python import OPERATORS as PYTHON_OPERATORS
from simulator.mutate.python import PythonMutation
from simulator.mutate.python import mutations as python_mutations
from simulator.reach.lines import Reach
from simulator.run.limits import refuse_workers_beyond, run_limits
from simulator.run.preflight import work
from simulator.scenario.model import load_scenario
from simulator.sweeps.journal import Journal
from simulator.sweeps.progress import ItemProgress
from stores import registry

__all__ = ["CODE", "EQUIVALENT", "HUNG_VERDICT", "NOT_REACHED", "OPERATORS", "RAISED_VERDICT",
           "SURVIVOR_CLASSES", "UNDETECTED", "MutantRow", "Options", "as_records", "campaign_reach",
           "generate", "mutated_line_reached", "run_campaign"]
COMMAND = "mutate"
"""The command a campaign's journal belongs to."""


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
                 echo: Callable[[str], None] = print, resume: bool = False,
                 live: bool | None = None) -> list[MutantRow]:
    """Generate, probe and judge every mutant of ``scenario_path``'s store
    kind, each row journalled in ``out_dir`` as it is judged; ``resume``: go
    on from the journal there (the same scenario and options), judging only
    what it lacks. ``live``: one updating progress line (default: on a
    terminal or in a notebook), else a plain line per mutant."""
    scenario_text = scenario_path.read_text(encoding="utf-8")
    base = registry.get(load_scenario(scenario_path).store)
    found = generate(base, options.operators, options.code)
    if not found:
        raise ValueError(f"mutate: {base.name} has nothing to mutate in "
                         f"{' or '.join(options.code)} with {', '.join(options.operators)} "
                         f"(its Lua: {', '.join(sorted(base.scripts)) or 'none'}; its classes: "
                         f"{', '.join(cls.__name__ for cls in base.classes) or 'none'})")
    named = [(mutant_kinds.mutant_name(base.name, mutation), mutation) for mutation in found]
    job = {"command": COMMAND, "scenario": str(scenario_path.resolve()),
           "scenario_digest": hashlib.sha256(scenario_text.encode()).hexdigest(),
           "options": options.identity(), "mutants": [name for name, _ in named]}
    journal = _resumed(out_dir, job) if resume else Journal.start(out_dir, job)
    plugin = mutant_kinds.write_plugin(out_dir, base.name, named)
    campaign = Campaign(scenario_path, base.name, plugin, out_dir.resolve(), options)
    prober, _ = probers(campaign, lua=not all(isinstance(mutation, PythonMutation)
                                              for mutation in found), python=False)
    sent = ("" if prober is None else f"; the scenario's fault-free run sent "
            f"{len(prober.calls)} script call(s) to probe with")
    judged = {record["row"]["number"]: record for record in journal.records}
    again = f"; {len(judged)} judged before, resumed" if resume else ""
    echo(f"mutate: {len(named)} mutant(s) of {base.name} ({', '.join(options.operators)})"
         f"{sent}{again}")
    to_judge = [(number, name, mutation)
                for number, (name, mutation) in enumerate(named, start=1)
                if number not in judged]
    progress = ItemProgress(len(named), f"mutate {base.name}", done=len(judged),
                            found=sum(record["row"]["detected"] for record in judged.values()),
                            echo=echo, live=live, unit="mutant")
    try:
        for judgment in _judged(campaign, to_judge, progress):
            record = {"row": asdict(judgment.row), "reach": judgment.reach,
                      "runs": judgment.runs}
            journal.append(record)
            judged[judgment.row.number] = record
            progress.item(_line(judgment.row), judgment.row.detected)
    except KeyboardInterrupt as stop:
        stop.add_note(f"{len(judged)} of {len(named)} mutant(s) judged, kept in "
                      f"{journal.path}: go on with mutate --resume {out_dir}")
        raise
    finally:
        progress.close()
    records = [judged[number] for number in sorted(judged)]
    reached, runs = campaign_reach(records)
    if runs:
        echo(f"mutate: over the campaign's {runs} run(s) (of its mutants), "
             f"{reached.account()}")
    return [MutantRow(**record["row"]) for record in records]


def campaign_reach(records: Sequence[dict[str, Any]]) -> tuple[Reach, int]:
    """The union of the reach of every hunt of a campaign's journal
    ``records``, and how many runs recorded it."""
    reached = Reach()
    runs = 0
    for record in records:
        if record["reach"] is not None:
            reached, runs = reached.union(Reach.decode(record["reach"])), runs + record["runs"]
    return reached, runs


def _resumed(out_dir: Path, job: dict[str, Any]) -> Journal:
    """The journal in ``out_dir``, if it is this campaign's."""
    journal = Journal.resume(out_dir, COMMAND)
    job = json.loads(json.dumps(job))  # as the journal holds it: tuples are lists there
    for what, words in (("scenario_digest", "the scenario's text"),
                        ("options", "the options"),
                        ("mutants", "the mutants generated (the store's code or the lab's "
                                    "operators)")):
        if journal.job.get(what) != job[what]:
            raise ValueError(f"--resume: {words} changed since the campaign in {out_dir} "
                             f"began; start it again in a new directory (or without --resume)")
    return journal


def _judged(campaign: Campaign, to_judge: Sequence[tuple[int, str, Mutation]],
            progress: ItemProgress) -> Iterator[Judgment]:
    """Each of ``to_judge`` judged, in this process or, with several local
    workers, as each worker finishes one (at most one mutant in flight per
    worker, so a kill loses at most that many)."""
    options = campaign.options
    workers = min(options.workers, len(to_judge))
    if workers > 1 and options.scheduler is None:
        # Each worker holds a run at a time: together they must fit the
        # memory limit one run is held to, as a hunt's workers must.
        scenario = load_scenario(campaign.scenario_path)
        refuse_workers_beyond(workers, work(scenario).memory_bytes,
                              run_limits(scenario.limits))
    if workers <= 1 or options.scheduler is not None:
        for number, name, mutation in to_judge:
            progress.judging([f"{number} {mutation.script}:{mutation.line}"])
            yield judge_mutant(campaign, number, name, mutation)
        return
    waiting = iter(to_judge)
    with _mutant_pool(workers) as pool:
        flying: dict[Future, tuple[int, str, Mutation]] = {}

        def submit() -> None:
            """The next mutant waiting, to a free worker (none left: nothing)."""
            item = next(waiting, None)
            if item is not None:
                flying[pool.submit(judge_mutant, campaign, *item)] = item

        for _ in range(workers):
            submit()
        while flying:
            progress.judging([f"{number} {mutation.script}:{mutation.line}"
                              for number, _, mutation in sorted(flying.values(),
                                                                key=lambda item: item[0])])
            done, _ = wait(flying, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda each: flying[each][0]):
                number, _, _ = flying.pop(future)
                try:
                    judgment = future.result()
                except BrokenProcessPool:
                    raise SimulationError(
                        f"mutate: a worker process died while judging mutant {number} "
                        f"(killed, or out of memory?); what was judged is kept: go on "
                        f"with --resume {campaign.plugin_dir}") from None
                submit()
                yield judgment


@contextmanager
def _mutant_pool(workers: int) -> Iterator[Executor]:
    """``workers`` local processes judging mutants, tied to this one (a
    forkserver's, as a hunt's pool: the lab imported once for all of them)."""
    from simulator.sweeps.lifeline import Lifeline

    context = multiprocessing.get_context("forkserver")
    # What every mutant's judging imports: its hunt, the families, the
    # embedded Redis its probes and reach replays run on.
    context.set_forkserver_preload([judge_mutant.__module__, Lifeline.__module__,
                                    "simulator.search.hunt", "fakeredis",
                                    *(f"simulator.families.{name}" for name in SHIPPED)])
    with Lifeline() as lifeline:
        pool = lifeline.pool(workers, context)
        try:
            yield pool
        finally:
            # However the campaign ends, what still runs is of no use: cut, not waited for.
            lifeline.cut()
            pool.shutdown(wait=True, cancel_futures=True)


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
