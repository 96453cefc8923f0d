"""``hunt``: search fault schedules for one that breaks an invariant.

Hypothesis draws fault schedules (``simulator.search.strategies``) for a scenario,
runs each, and stops at the first run that breaks: its summary meets the
breaking condition (``--invariant``, see ``simulator.scenario.conditions``), or the
store does worse than a reference store kind under the same scenario, seed
and schedule on one of its family's invariants (``--reference``), or either
when both are given. Then it shrinks the schedule (fewer faults, earlier, on
lower replicas) while it stays broken, and the smallest one is written as a
race report that ``replay`` reproduces. Given the same seed, the same hunt
finds the same schedule. A time budget bounds the whole search, shrinking
included: past it, no new run is started and the best schedule found so far
is kept.

The search may run on several processes or a Dask cluster
(``simulator.search.batches``): the schedules are drawn in the driver in the
order a one-process hunt draws them, judged in numbered batches, and the
lowest-numbered break wins, so the schedule found, the runs counted and the
report are the same for any number of workers. The shrinking runs in the
driver: Hypothesis's ``find`` again with the same seed, its first schedules
answered from what the search judged (checked to be the same schedules), so
only the shrinking's own runs cost; a schedule it meets twice runs once.

A condition naming a metric the scenario's family never reports is refused
before anything runs (``simulator.run.preflight``), so a typo never reads as "no
schedule broke it". Then the scenario runs once without faults (the
baseline), where a metric the summary lacks is refused too; a baseline that
already breaks is reported with an empty schedule; and the calls a lost
request or reply may target are those the baseline actually sent, the
replicas' and the migration's apart, so no drawn fault aims at a call nobody
makes.

Each run is reported to a ``progress`` callback with its phase: the
baseline, the search (no broken schedule seen yet) or the shrinking.
``PhaseSummary`` turns those into the few lines ``hunt`` prints unless asked
for every run.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import Phase, find
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from hypothesis.reporting import with_reporter

from simulator.engine.trace import Trace
from simulator.families import SHIPPED, family_of, invariants_for, refuse_other_family
from simulator.reach.lines import REACH, STATE, Reach
from simulator.run.compose import RunResult, resolve_backend, run_scenario
from simulator.run.hang import bounded
from simulator.run.limits import refuse_workers_beyond, run_limits
from simulator.run.preflight import known_metrics, refuse_unknown, work
from simulator.scenario.conditions import Condition, Invariant, Verdict, check_metrics, judge
from simulator.scenario.faults import FAULT_KINDS
from simulator.scenario.model import (
    Scenario,
    ScenarioError,
    parse_scenario,
    read_toml,
    set_dotted,
)
from simulator.scenario.reconfigure import drawn_values, reloadable
from simulator.scenario.stand_in import (
    placed,
    reference_kind,
    shown,
    stand_in,
    stood_for,
    with_stand_in,
)
from simulator.search.batches import Judged, Search, batch_pool, hunt_settings, search_in_batches
from simulator.search.corpus import Corpus, guided
from simulator.search.race_report import RaceReport, ReportInvariant
from simulator.search.strategies import (
    EVERY_KIND,
    REPLICA_FAULTS,
    every_kind,
    fault_schedules,
)
from simulator.search.strategies import fault as one_fault
from simulator.world.operations import MIGRATOR
from stores import registry

Progress = Callable[[str, int, str], None]
"""``progress(phase, run, line)``: ``phase`` is ``"baseline"``, ``"rehearsal"``
(the declared migrations run once to learn them, not counted), ``"search"``
(no broken schedule seen yet), ``"shrink"`` or ``NOTE`` (a line to show, no run);
``run`` counts the candidate's runs."""


BROKEN = " BROKEN"
NOTE = "note"
"""A progress line that tells, rather than counts a run."""
SHRINK_BUDGET_S = 240.0
"""The longest a hunt shrinks (within its --budget): past it, the smallest
breaking schedule so far is kept and one line says so. Under Hypothesis's own
five minutes, after which it stops with a plea to report the slowness."""
"""How a progress line ends when its run broke the invariant."""


class PhaseSummary:
    """A hunt's progress as a person reads it, for ``progress``: the
    baseline, the run that first broke (where the shrinking starts), and every
    ``every`` runs of a phase a count, with the latest broken schedule while
    shrinking; ``totals`` once it is over. ``echo`` prints a line."""

    def __init__(self, echo: Callable[[str], None], every: int = 25) -> None:
        self.echo = echo
        self.every = every
        self.runs: Counter[str] = Counter()
        self.latest_broken: str | None = None

    def __call__(self, phase: str, run: int, line: str) -> None:
        if phase == NOTE:
            self.echo(f"hunt: {line}")
            return
        self.runs[phase] += 1
        count = self.runs[phase]
        broken = line.endswith(BROKEN)
        if broken:
            self.latest_broken = line.removesuffix(BROKEN)
        if phase in ("baseline", "rehearsal"):
            self.echo(f"hunt: {phase}: {line}")
        elif phase == "search" and broken:
            self.echo(f"hunt: search run {count} broke it ({self.latest_broken}); "
                      "now shrinking the schedule")
        elif count % self.every == 0 and phase == "search":
            self.echo(f"hunt: search: {count} schedules tried, none broke it yet")
        elif count % self.every == 0:
            self.echo(f"hunt: shrink: {count} runs; latest broken schedule: "
                      f"{self.latest_broken}")

    def totals(self) -> str:
        """``1 baseline, 37 search and 233 shrink runs``."""
        return (f"{self.runs['baseline']} baseline, {self.runs['search']} search and "
                f"{self.runs['shrink']} shrink runs")


@dataclass(frozen=True)
class CallTargets:
    """The labels of the calls a run executed: script names or verbs."""

    replicas: tuple[str, ...]
    migration: tuple[str, ...]
    migration_commands: int | None = None
    """The most commands one attempt of the migration executed, when a run
    showed it (``migration_kill_points``)."""


def calls_sent(trace: Trace) -> CallTargets:
    """The calls ``trace`` shows executed, by the replicas and by the migration."""
    columns = trace.columns
    replicas, migration = set(), set()
    per_attempt: Counter[int] = Counter()
    for kind, replica, incarnation, label in zip(columns["kind"], columns["replica"],
                                                 columns["incarnation"], columns["detail"],
                                                 strict=True):
        if kind == "call_executed" and label:
            (migration if replica == MIGRATOR else replicas).add(label)
            if replica == MIGRATOR:
                per_attempt[incarnation] += 1
    return CallTargets(tuple(sorted(replicas)), tuple(sorted(migration)),
                       max(per_attempt.values()) if per_attempt else None)


@dataclass(frozen=True)
class Found:
    schedule: list[dict[str, Any]]
    verdict: Verdict
    result: RunResult
    runs: int
    schedules: int = 0
    """Schedules the search judged until the first that broke, that one
    included (0: the baseline broke); the shrinking's runs not counted."""

    @property
    def value(self) -> Any:
        """The broken metric's value (the values, by metric, when several)."""
        return self.verdict.value


class Remembered:
    """Run summaries by key, the least recently used dropped past ``kept`` (a
    summary is a few kilobytes: some tens of megabytes at most). Runs are
    deterministic, so a summary remembered is the one the run would give."""

    def __init__(self, kept: int = 4_096) -> None:
        self.kept = kept
        self._summaries: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._summaries)

    def summary(self, key: list[Any], run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The summary remembered under ``key`` (JSON-able parts), else ``run()``'s, kept."""
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
        summary = self._summaries.get(digest)
        if summary is None:
            summary = self._summaries[digest] = run()
            while len(self._summaries) > self.kept:
                self._summaries.popitem(last=False)
        else:
            self._summaries.move_to_end(digest)
        return dict(summary)  # the caller's to keep: the one remembered stays as run


REFERENCE_RUNS = Remembered()
"""Reference runs' summaries this process made, by scenario, schedule and
seed, for every hunt of shipped kinds (``Judge.reference_summary``)."""
JUDGED = Remembered()
"""The summaries of each hunt's runs in this process, by hunt, scenario and
schedule: Hypothesis draws one schedule more than once (14-23% of the first
hundred on the plain hunt scenarios), each judged again from here."""
_HUNTS = itertools.count(1)


def _shipped_only(data: dict[str, Any]) -> bool:
    """Whether every store kind ``data`` names (its store, its migrations'
    targets) is one the lab ships: a plugin's kind may be registered again
    under the same name with other code in one process (a test, a notebook)."""
    named = [data.get("store"), *(step.get("to") for step in data.get("migrations") or ()
                                  if isinstance(step, dict))]
    shipped = registry.shipped()
    return all(isinstance(name, str) and name in shipped for name in named)


@dataclass(frozen=True)
class Judge:
    """How a hunt runs and judges a schedule: picklable, so a worker process or
    a cluster's worker judges exactly as the driver does
    (``simulator.search.batches.BatchJudge``)."""

    data: dict[str, Any]
    """The scenario as read, with the hunt's own overrides (its limits)."""
    seed: int
    invariant: Condition | None
    reference: str | None
    invariants: tuple[Invariant, ...]
    plugins: tuple[str, ...]
    """The modules a worker imports first: where the store kinds come from."""
    run_bound_s: float | None = None
    """Wall time a run may take before it is stopped as ``Hung`` (``None``:
    unbounded): a store that never gives the simulation back, in whatever
    process judges it."""
    hunt: str = ""
    """The hunt this judge is one of, unique in the driver's process: its
    runs' summaries are remembered under it (``JUDGED``); empty, never."""
    coverage: bool = False
    """Whether runs record their reach (``simulator.reach``): the
    candidate's count in the hunt's; the reference's only tell whether the
    candidate's run was the same as theirs (``Judged.same``)."""

    def run(self, data: dict[str, Any], schedule: list[dict[str, Any]]) -> RunResult:
        """``schedule``'s whole run from t = 0: its trace too."""
        with self._bounded():
            return run_scenario(parse_scenario(_scheduled(data, schedule)), seed=self.seed,
                                coverage=self.coverage)

    def summary(self, data: dict[str, Any], schedule: list[dict[str, Any]]) -> dict[str, Any]:
        """``schedule``'s run's summary: remembered if this hunt ran it
        already, else run."""
        if not self.hunt:
            return self._summary(data, schedule)
        return JUDGED.summary([self.hunt, data, schedule, self.seed],
                              lambda: self._summary(data, schedule))

    def _summary(self, data: dict[str, Any], schedule: list[dict[str, Any]]) -> dict[str, Any]:
        """``schedule``'s run's summary, run now (from t = 0)."""
        return self.run(data, schedule).summary

    def _bounded(self) -> AbstractContextManager[None]:
        return bounded(self.run_bound_s) if self.run_bound_s else nullcontext()

    def with_reference(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the reference kind where it stands in (``stand_in``)."""
        return with_stand_in(data, self.reference)

    def run_judged(self, schedule: list[dict[str, Any]], complete: bool
                   ) -> tuple[RunResult, Verdict]:
        """Run ``schedule`` on the candidate, from t = 0, and judge it (see ``verdict``)."""
        result = self.run(self.data, schedule)
        return result, self.verdict(result.summary, schedule, complete)

    def verdict(self, summary: dict[str, Any], schedule: list[dict[str, Any]],
                complete: bool) -> Verdict:
        """Judge the candidate's ``summary``, running ``schedule`` on the
        reference when one is asked and, unless ``complete`` (the whole story
        for a report), the condition alone did not already break."""
        reference_summary = None
        if self.reference is not None and (complete or self.invariant is None
                                           or not self.invariant.holds_in(summary)):
            reference_summary = self.reference_summary(schedule)
        return judge(summary, self.invariant,
                     None if self.reference is None else shown(self.reference),
                     reference_summary, self.invariants)

    def reference_summary(self, schedule: list[dict[str, Any]]) -> dict[str, Any]:
        """The reference's summary under ``schedule``: run once per process for
        a scenario of shipped kinds only (whose code cannot change under the
        same name), then remembered (``REFERENCE_RUNS``), since runs are
        deterministic. Every mutant of a campaign is judged against the same
        reference runs: only the first mutant's hunt pays for them."""
        data = self.with_reference(self.data)
        if not _shipped_only(data):
            return self.summary(data, schedule)
        return REFERENCE_RUNS.summary([data, schedule, self.seed],
                                      lambda: self.summary(data, schedule))

    def breaks(self, schedule: list[dict[str, Any]]) -> Judged:
        """One run of the search or the shrinking, and its progress line."""
        summary = self.summary(self.data, schedule)
        verdict = self.verdict(summary, schedule, complete=False)
        return Judged(verdict.broken, f"{len(schedule)} fault(s), {verdict.observed}"
                                      f"{BROKEN if verdict.broken else ''}", summary.get(REACH),
                      self.same_as_reference(summary, schedule))

    def same_as_reference(self, summary: dict[str, Any], schedule: list[dict[str, Any]]
                          ) -> bool | None:
        """Whether the candidate's run of ``schedule`` was the reference's:
        the same trace, and (on Redis) the same replies and keys at the end.
        None without a reference or the reach (which digests the server's)."""
        if self.reference is None or not self.coverage:
            return None
        theirs = self.reference_summary(schedule)
        return all(summary.get(name) == theirs.get(name)
                   for name in ("trace_fingerprint", STATE))


class Hunt:
    """One search over one scenario. ``workers``: processes judging schedules
    at once (1: in this one); ``scheduler``: a Dask scheduler's address, to
    judge them on that cluster instead (``simulator.search.batches``). Neither
    changes what is found, nor the runs counted."""

    def __init__(self, scenario_path: Path, invariant: Condition | None = None, seed: int = 0,
                 examples: int = 100, time_budget_s: float = 600, max_faults: int = 4,
                 kinds: tuple[str, ...] = REPLICA_FAULTS, target: str = "any",
                 progress: Progress | None = None, reference: str | None = None,
                 workers: int = 1, scheduler: str | None = None,
                 plugins: Sequence[str] = (), overrides: dict[str, Any] | None = None,
                 run_bound_s: float | None = None, coverage: bool = False,
                 swarm: bool = False, guided: bool = False) -> None:
        if invariant is None and reference is None:
            raise ValueError("hunt: give an invariant (--invariant), a reference store kind "
                             "(--reference), or both")
        if workers < 1:
            raise ValueError(f"--workers: at least 1, got {workers}")
        self.scenario_path = scenario_path
        self.data = read_toml(scenario_path)
        self.overrides = dict(overrides or {})
        """``--set``: scenario fields every run of the hunt has, and its report."""
        for path, value in self.overrides.items():
            try:
                set_dotted(self.data, path, value)
            except ScenarioError as error:
                raise ScenarioError(f"{scenario_path}: {error}") from None
        self.scenario: Scenario = parse_scenario(self.data, source=str(scenario_path))
        self.invariant = invariant
        # A bare kind is placed where it can stand in, once: the runs, the
        # report and what the hunt says all name the same places.
        self.reference = None if reference is None else placed(reference, self.data)
        self.invariants: tuple[Invariant, ...] = ()
        if self.reference is not None:
            self.invariants = tuple(invariants_for(self.scenario.kind))
            self._check_reference(self.reference, given=reference)
        self.seed = seed
        self.examples = examples
        self.deadline = time.monotonic() + time_budget_s
        self.max_faults = max_faults
        if tuple(kinds) == EVERY_KIND:
            kinds = self._every_kind()
        self.kinds = kinds
        self.swarm = swarm
        """Each schedule draws a subset of ``kinds`` to use (swarm testing)."""
        self.target = target
        self.progress = progress
        self.workers = workers
        self.scheduler = scheduler
        self.run_bound_s = run_bound_s
        """Wall time each run may take, in whatever process runs it (``Judge``)."""
        self.token = f"{os.getpid()}.{next(_HUNTS)}"
        """This hunt, among those of this process (``Judge.hunt``)."""
        if "migrate" in kinds:
            self._operator_draws_migrations()
        self.reloads: dict[str, list[Any]] = {}
        """What ``--faults reconfigure`` may change, and to what."""
        if "reconfigure" in kinds:
            self._operator_draws_reconfigurations()
        cluster = self.scenario.server.cluster
        if "failover" in kinds and cluster is not None and not cluster.replicas_per_shard:
            raise ValueError("--faults failover: the scenario's cluster has no replica to "
                             "promote (server.cluster.replicas_per_shard = 0)")
        kinds_used = [self.scenario.store, *(step.to for step in self.scenario.migrations),
                      *([reference_kind(reference)] if reference else [])]
        self.plugins = tuple(dict.fromkeys([*plugins, *self.scenario.plugins,
                                            *registry.plugins_for(kinds_used)]))
        self.coverage = coverage
        self.reach: Reach | None = None
        """With ``coverage``: the union of the reach of every run counted
        (``simulator.reach``), the fault-free one's included."""
        self.guided = guided and coverage
        """Half the draws derive from the schedules that reached new store
        lines (``simulator.search.corpus``; it needs ``coverage``)."""
        self.corpus: Corpus | None = None
        """With ``guided``: the schedules that reached new store lines, which
        the search's draws derive from."""
        self.all_same: bool | None = None
        """With ``coverage`` and a reference: whether every run counted was
        the reference's (``Judge.same_as_reference``)."""
        self.runs = 0
        self.discarded_runs = 0
        """Runs of batches judged in parallel after the one that broke: not counted in ``runs``."""
        self._broken_seen = False

    @property
    def question(self) -> str:
        """When a run counts as broken, in words: the condition, the reference, or both."""
        asked = [] if self.invariant is None else [str(self.invariant)]
        if self.reference is not None:
            asked.append(f"{self.under_test} worse than {shown(self.reference)}")
        return ", or ".join(asked)

    @property
    def swapped(self) -> str:
        """Where the reference stands in, in words: ``store (KIND), ...``."""
        if self.reference is None:
            return ""
        return ", ".join(f"{path} ({stood_for(self.data, f'{path}={kind}')[0]})"
                         for path, kind in stand_in(self.reference).items())

    @property
    def under_test(self) -> str:
        """The kind the reference stands in for: the store, or what the
        reference's paths name (a migration's target)."""
        return ", ".join(stood_for(self.data, self.reference or ""))

    @property
    def judge(self) -> Judge:
        """How this hunt's runs are judged, with its data as it is now."""
        return Judge(self.data, self.scenario.seed, self.invariant, self.reference,
                     self.invariants, self.plugins, self.run_bound_s, self.token, self.coverage)

    def _check_reference(self, reference: str, given: str) -> None:
        """The reference must be of the candidate's family and take its scenario
        (``given``: the reference as the user wrote it)."""
        kind = registry.get(reference_kind(reference))
        refuse_other_family(self.scenario.kind, kind)
        if not self.invariants:
            raise ValueError(f"reference {reference!r}: the family {family_of(kind).name!r} "
                             f"declares no invariants to compare")
        # Its settings and backend are checked now, not after a search's worth of runs.
        try:
            resolve_backend(parse_scenario(with_stand_in(self.data, reference), source=(
                f"{self.scenario_path} with the reference store {shown(reference)!r}")), None)
        except ScenarioError as error:
            if self.scenario.migrations and "=" not in given:
                targets = ",".join(f"migrations.{index}.to={given}"
                                   for index in range(len(self.scenario.migrations)))
                raise ScenarioError(
                    f"{error} (the reference replaced the fleet's store; to compare the "
                    f"migrations' target instead, give --reference {targets})") from None
            raise

    def _tell(self, phase: str, line: str) -> None:
        if self.progress is not None:
            self.progress(phase, self.runs, line)

    def _counted(self, judged: Judged) -> None:
        """A run of the search or the shrinking, judged: counted and told."""
        self.runs += 1
        self._reached(judged.reach, judged.same)
        self._tell("shrink" if self._broken_seen else "search", judged.line)
        self._broken_seen = self._broken_seen or judged.broken

    def _reached(self, reach: str | None, same: bool | None) -> None:
        if reach is not None:
            run = Reach.decode(reach)
            self.reach = run if self.reach is None else self.reach.union(run)
        if same is not None:
            self.all_same = same and self.all_same is not False

    def strategy(self, calls: CallTargets) -> st.SearchStrategy[list[dict[str, Any]]]:
        """The schedules this hunt draws, aimed at ``calls`` (those its
        baseline sent); ``guided``, half of them from its corpus."""
        scenario = self.scenario
        cluster = scenario.server.cluster
        operator = "migrate" in self.kinds
        migration = (bool(scenario.operations) or operator) and self.target != "replicas"
        shape = {"kinds": self.kinds, "migration": migration,
                 "only_migration": self.target == "migration",
                 "migration_calls": calls.migration, "timescales": timescales(scenario),
                 "steps": len(scenario.migrations) if operator else 0,
                 "migration_commands": calls.migration_commands, "reloads": self.reloads,
                 "shards": cluster.shards if cluster is not None else None}
        replicas, until_us = scenario.fleet.replicas, scenario.duration_us
        fresh = fault_schedules(replicas, until_us, calls.replicas, max_faults=self.max_faults,
                                swarm=self.swarm, **shape)
        if self.corpus is None:
            return fresh
        return guided(fresh, self.corpus, one_fault(replicas, until_us, calls.replicas, **shape),
                      replicas, until_us, self.max_faults)

    def _every_kind(self) -> tuple[str, ...]:
        """``--faults all``: every kind this scenario can take."""
        scenario = self.scenario
        cluster = scenario.server.cluster
        return every_kind(bool(scenario.migrations),
                          bool(drawn_values(scenario.kind.settings_model,
                                            scenario.store_settings)),
                          None if cluster is None else bool(cluster.replicas_per_shard))

    def _operator_draws_migrations(self) -> None:
        """``--faults migrate``: the scenario's [[migrations]] are what the
        operator may run, each only when and as a drawn ``migrate`` entry says
        (``scheduled``); the baseline runs none. The report says so too."""
        if not self.scenario.migrations:
            raise ValueError("--faults migrate: the scenario declares no [[migrations]] for "
                             "the operator to run (add one: its target and settings)")
        for index in range(len(self.scenario.migrations)):
            self.overrides[f"migrations.{index}.scheduled"] = True
            set_dotted(self.data, f"migrations.{index}.scheduled", True)
        self.scenario = parse_scenario(self.data, source=str(self.scenario_path))

    def _operator_draws_reconfigurations(self) -> None:
        """``--faults reconfigure``: the store's reloadable settings it is
        configured with, each with the values a change may give it."""
        kind = self.scenario.kind
        self.reloads = drawn_values(kind.settings_model, self.scenario.store_settings)
        if not self.reloads:
            allowed = reloadable(kind.settings_model)
            raise ValueError(
                f"--faults reconfigure: the store {kind.name!r} reloads no setting"
                + (f" it is configured with (it may reload {', '.join(allowed)})"
                   if allowed else ""))

    def search(self) -> Found | None:
        """The first schedule that breaks, shrunk (None: none did)."""
        scenario = self.scenario
        if self.invariant is not None:
            refuse_unknown(self.invariant, known_metrics(scenario))
        if self.target == "migration" and not scenario.operations:
            raise ValueError("--target migration: the scenario runs no migration")
        if self.scheduler is None:
            # Local workers each hold a run: together they must fit the memory
            # limit, as the runs will have it (``data``, with any limit flags).
            runs = parse_scenario(self.data, source=str(self.scenario_path))
            refuse_workers_beyond(self.workers, work(runs).memory_bytes, run_limits(runs.limits))
        # The workers start while the baseline runs.
        with batch_pool(self.workers, self.scheduler, preload=self.worker_modules()) as pool:
            baseline, verdict = self._baseline()
            if verdict.broken:
                return Found([], verdict, baseline, self.runs)
            if self.examples == 0:  # the fault-free run alone was asked for
                return None
            calls = calls_sent(baseline.trace)
            if "migrate" in self.kinds:
                calls = self._rehearse(calls)
            if self.guided:
                self.corpus = Corpus(self.reach)
            strategy = self.strategy(calls)
            searched = search_in_batches(strategy, self.judge, self.seed, self.examples,
                                         self.deadline, pool, self._counted, self.corpus)
        self.discarded_runs = searched.discarded_runs
        if searched.broken_at is None:
            return None
        schedule = self._shrink(strategy, searched)
        # The schedule found, run again for its whole story (the reference
        # too): the runs are deterministic, so this is the run ``find`` saw.
        result, verdict = self.judge.run_judged(schedule, complete=True)
        return Found(schedule, verdict, result, self.runs, schedules=searched.broken_at + 1)

    def worker_modules(self) -> list[str]:
        """What every local worker imports once, in the forkserver, rather than
        in its first run (there, a quarter of a second of CPU, three times a
        quiet run's own): this module, the families (imported on first use)
        and the embedded Redis when the runs use it."""
        modules = [__name__, *(f"simulator.families.{name}" for name in SHIPPED)]
        if resolve_backend(self.scenario, None).kind == "fakeredis":
            modules.append("fakeredis")
        return modules

    def _shrink(self, strategy: st.SearchStrategy[list[dict[str, Any]]],
                searched: Search) -> list[dict[str, Any]]:
        """Shrink the search's breaking schedule, here: the search's ``find``
        again, with its seed, now with the shrink phase. Its generate phase
        draws the search's schedules again, answered from what the search
        judged (the runs are deterministic), so only the shrinking runs; a
        schedule drawn otherwise than the search drew it is a lab bug and
        stops the hunt. A schedule the shrinking meets twice runs once."""
        drawn = iter(enumerate(searched.drawn))
        judge = self.judge
        known: dict[str, bool] = {}
        replayed = False  # until the search's breaking schedule is drawn again
        # The lab's own bound on shrinking, before Hypothesis's (which stops
        # a slow shrink after five minutes with a plea to report it).
        until = min(self.deadline, time.monotonic() + SHRINK_BUDGET_S)
        cut = False  # whether the bound left a candidate unjudged
        corpus = self.corpus
        if corpus is not None:
            # The draws see the corpus the search's draws saw, number for
            # number; it learns nothing more (every schedule it may use is told).
            corpus.calls, corpus.wait = 0, None

        def breaks(schedule: list[dict[str, Any]]) -> bool:
            nonlocal replayed
            if corpus is not None:
                corpus.calls += 1
            if not replayed:
                index, expected = next(drawn, (None, None))
                if schedule != expected:
                    raise RuntimeError(
                        f"hunt: shrinking drew schedule {index} otherwise than the search "
                        f"did ({schedule} against {expected}): Hypothesis's generation was "
                        f"not repeated; report this with the hunt's command")
                replayed = index == searched.broken_at
                known[_key(schedule)] = replayed
                return replayed
            key = _key(schedule)
            if key not in known:
                if time.monotonic() > until:
                    nonlocal cut
                    cut = True
                    return False  # past the budget: the best schedule so far is kept
                judged = judge.breaks(schedule)
                self._counted(judged)
                known[key] = judged.broken
            return known[key]

        said: list[str] = []  # what Hypothesis would print: the lab says it its own way
        try:
            with with_reporter(said.append):
                shrunk = find(strategy, breaks, random=random.Random(self.seed),
                              settings=hunt_settings(self.examples,
                                                     [Phase.generate, Phase.shrink]))
        except NoSuchExample:
            raise RuntimeError("hunt: shrinking did not meet the search's breaking schedule "
                               "again; report this with the hunt's command") from None
        if cut or said:
            budget = ("the hunt's --budget" if until == self.deadline
                      else f"{SHRINK_BUDGET_S:.0f} s")
            self._tell(NOTE, f"shrinking stopped at its budget ({budget}): the smallest "
                                 f"breaking schedule so far is kept, {len(shrunk)} fault(s)")
        return shrunk

    def _rehearse(self, calls: CallTargets) -> CallTargets:
        """``--faults migrate``: the baseline runs no migration, so what the
        operator's migration sends is learnt from one run of the declared
        steps as declared, with no fault (not judged): the labels its calls
        carry, for losses aimed at them, and how many commands it runs, for
        kill points anywhere in it (its cleanup comes last)."""
        declared = copy.deepcopy(self.data)
        for step in declared.get("migrations", []):
            step["scheduled"] = False
        rehearsed = calls_sent(self.judge.run(declared, []).trace)
        self._tell("rehearsal", f"the declared migrations, no faults: "
                                f"{rehearsed.migration_commands or 0} migration command(s)")
        return CallTargets(calls.replicas, rehearsed.migration, rehearsed.migration_commands)

    def _baseline(self) -> tuple[RunResult, Verdict]:
        """The scenario without faults; a condition naming a metric it lacks is refused."""
        self.runs += 1
        judge = self.judge
        baseline = judge.run(self.data, [])
        self._reached(baseline.summary.get(REACH),
                      judge.same_as_reference(baseline.summary, []))
        if self.invariant is not None:
            check_metrics(self.invariant, baseline.summary)
        verdict = judge.verdict(baseline.summary, [], complete=True)
        self._tell("baseline", f"no faults, {verdict.observed}"
                               f"{BROKEN if verdict.broken else ''}")
        return baseline, verdict

    def race_report(self, found: Found, out: Path) -> RaceReport:
        """The race report of ``found``, to be written at ``out`` (its scenario
        path is relative to ``out``'s directory)."""
        scenario_ref = os.path.relpath(self.scenario_path.resolve(), out.parent.resolve())
        variant = {**self.overrides, "store": self.scenario.store}
        variant.update({f"migrations.{index}.to": step.to
                        for index, step in enumerate(self.scenario.migrations)})
        # What replay must import: the plugins the report's kinds came from.
        plugins = registry.plugins_for([*variant.values(),
                                        *([reference_kind(self.reference)]
                                          if self.reference else [])])
        return RaceReport(
            title=f"Hunted: {self.question}, with {len(found.schedule)} fault(s)",
            story=_story(found.schedule, found.verdict), scenario=scenario_ref,
            seed=self.scenario.seed, plugins=plugins,
            fingerprint=found.result.summary["trace_fingerprint"], variant=variant,
            # A reference hunt's reference is the fixed store: what the engineer ships.
            fixed={} if self.reference is None else {**self.overrides,
                                                      **stand_in(self.reference)},
            schedule=copy.deepcopy(found.schedule),
            invariant=ReportInvariant.of(self.invariant, None if self.reference is None
                                         else shown(self.reference)))

    def write_report(self, found: Found, out: Path) -> None:
        """A race report of ``found`` (and its trace beside it) that ``replay`` reproduces."""
        out.parent.mkdir(parents=True, exist_ok=True)
        self.race_report(found, out).dump(out)
        found.result.trace.write_parquet(out.with_suffix(".trace.parquet"))


def timescales(scenario: Scenario) -> list[int]:
    """The scenario's own durations, in µs, that a fault must be measured
    against to matter: the callers' timeout, every duration among the store's
    settings (its TTLs, grace, flush and sweep periods) and the migrations'
    restart times."""
    found = {scenario.network.timeout_us}
    for name, value in scenario.settings:
        if name.endswith("_ms") and isinstance(value, int) and value > 0:
            found.add(value * 1_000)
    found.update(step.restart_after for step in scenario.migrations if step.restart_after)
    return sorted(value for value in found if value <= scenario.end_us)


def _reconfigured(fault: dict[str, Any]) -> str:
    """A reconfigure entry's change and whom it reached, for a report's story."""
    changes = ", ".join(f"{name} = {value}" for name, value in fault["settings"].items())
    whom = f"replicas {fault['replicas']}" if fault.get("replicas") else "the fleet"
    return f"{whom} ({changes})"


def _scheduled(data: dict[str, Any], schedule: list[dict[str, Any]]) -> dict[str, Any]:
    """``data`` with ``schedule`` as its fault schedule (a copy)."""
    data = copy.deepcopy(data)
    data.setdefault("faults", {})["schedule"] = schedule
    return data


def _key(schedule: list[dict[str, Any]]) -> str:
    """A schedule as a key: its faults' fields in a fixed order."""
    return json.dumps(schedule, sort_keys=True)


def _story(schedule: list[dict[str, Any]], verdict: Verdict) -> str:
    steps = []
    for fault in schedule:
        target = ("the migration" if fault.get("migration") else
                  f"step {fault['step']}" if fault["fault"] == "migrate" else
                  _reconfigured(fault) if fault["fault"] == "reconfigure" else
                  f"shard {fault['shard']}" if fault.get("shard") is not None else
                  "the server" if FAULT_KINDS[fault["fault"]].hits_server else
                  f"replicas {fault['replicas']}" if "replicas" in fault else
                  "the fleet" if fault.get("replica") is None else f"replica {fault['replica']}")
        what = fault["fault"].replace("_", " ")
        call = f" of {fault['call']}" if fault.get("call") else ""
        steps.append(f"at {fault['at']}, {what}{call} on {target}")
    happened = "; ".join(steps) if steps else "no fault at all"
    return f"Found by hunt: {happened}. Then {verdict.observed} {verdict.rule}."
