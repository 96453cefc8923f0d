"""A hunt's search on every core, or on a Dask cluster: numbered batches, the
lowest break wins.

The rules kept here:

* **The schedules are drawn in the driver, once, in the sequential hunt's
  order.** One Hypothesis ``find`` with the hunt's seed, generate phase only,
  draws them; its condition hands each schedule to the workers and answers
  "not broken" until the search is over. Hypothesis's generation depends on
  its random and on the outcome of the examples before, and in a sequential
  hunt every example before the first break is "not broken" too: so the
  schedules drawn here are, index for index, the ones a sequential hunt with
  the same seed tries (a test checks it). Drawing costs the driver a few
  milliseconds a schedule, next to the tenths of a second a run costs a worker.
* **Consecutive schedules form numbered batches**; a worker judges a batch in
  order and stops at its first break. **The lowest-numbered break wins**: once
  any batch has broken, nothing more is drawn and every batch numbered after
  it is dropped (a local worker is cut off mid-run); the batches before it are
  awaited, since one of them may break earlier. So the breaking schedule, the
  runs counted and every progress line (told in index order) are the same
  whatever the number of workers, and the same as a sequential hunt's; only
  the runs of dropped batches differ, and they are counted apart
  (``Search.discarded_runs``).
* **Shrinking is not done here**: the driver shrinks from what the search
  knows (``simulator.search.hunt``).
* **The time budget** is a wall-clock deadline every worker reads before each
  run: past it, a batch stops and its schedules left count as not broken, as
  a sequential hunt answers past its budget; the driver stops drawing.
* **Workers.** ``workers == 1`` judges in the driver's own process, as a hunt
  always did. More are local processes holding the driver's lifeline
  (``simulator.sweeps.lifeline``), started before the baseline run so they are
  ready when the search begins; whatever ends the search (a break, the end of
  the schedules, an error, Ctrl-C, the driver killed), they go with it. A Dask
  scheduler address runs the batches on that cluster instead
  (``simulator.sweeps.execute.dask_executor``); its workers need the lab, and
  the hunt's plugins on their ``PYTHONPATH``. A worker imports the hunt's
  plugins before it judges (``BatchJudge.plugins``).
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from simulator.engine.kernel import SimulationError
from simulator.run.stopping import raise_if_told
from stores import registry

Schedule = list[dict[str, Any]]

SCHEDULES_PER_BATCH = 2
"""Schedules a batch holds. Results do not depend on it; small keeps the wait
for the batches before a break short, and a batch's dispatch costs well under
a millisecond next to a run's tenths of a second."""
BATCHES_PER_WORKER = 2
"""Batches kept in flight per worker: one running, one waiting, so no worker
waits for the driver to draw."""


def hunt_settings(examples: int, phases: Sequence[Phase]) -> settings:
    """The Hypothesis settings of a hunt's ``find``: the search's and the
    shrinking's must differ only in their phases, so both draw alike."""
    return settings(max_examples=examples, database=None, deadline=None, phases=list(phases),
                    suppress_health_check=list(HealthCheck))


@dataclass(frozen=True)
class Judged:
    """One schedule run and judged: broken or not, its progress line, and
    what of the store it reached when asked (``simulator.reach``'s record)."""

    broken: bool
    line: str
    reach: str | None = None
    same: bool | None = None
    """With a reference and the reach asked: whether the run was the
    reference's to the last event and the last reply and key (``mutate``'s
    equivalence); None otherwise."""


class BatchJudge(Protocol):
    """What a worker needs to run and judge a schedule (``simulator.search.hunt.Judge``):
    picklable, and naming the plugins its store kinds come from."""

    plugins: tuple[str, ...]

    def breaks(self, schedule: Schedule) -> Judged: ...


@dataclass(frozen=True)
class Batch:
    """Schedules ``first``, ``first + 1``, ... of the search, numbered ``number``."""

    number: int
    first: int
    schedules: tuple[Schedule, ...]


@dataclass(frozen=True)
class BatchOutcome:
    """A batch judged: a line for each schedule run, in order, and where in the
    batch it first broke (``None``: it did not, or the budget ran out first)."""

    number: int
    lines: tuple[str, ...]
    broken_at: int | None
    reaches: tuple[str | None, ...] = ()
    """Each schedule's reach, in the order of ``lines`` (when the hunt asks)."""
    sames: tuple[bool | None, ...] = ()
    """Each schedule's ``Judged.same``, in the order of ``lines``."""


def judge_batch(judge: BatchJudge, batch: Batch, deadline_epoch_s: float) -> BatchOutcome:
    """A batch, in a worker: its schedules in order until the first that breaks
    or the deadline (wall-clock seconds since the epoch, so a cluster's worker
    reads the same instant)."""
    registry.load_plugins(judge.plugins)
    lines, reaches, sames = [], [], []
    for index, schedule in enumerate(batch.schedules):
        if time.time() > deadline_epoch_s:
            break
        judged = judge.breaks(schedule)
        lines.append(judged.line)
        reaches.append(judged.reach)
        sames.append(judged.same)
        if judged.broken:
            return BatchOutcome(batch.number, tuple(lines), index, tuple(reaches), tuple(sames))
    return BatchOutcome(batch.number, tuple(lines), None, tuple(reaches), tuple(sames))


def warm_up() -> None:
    """Nothing: submitted once per local worker so it starts while the baseline runs."""


def _start_workers(pool: Executor, workers: int) -> None:
    """Start every local worker now (in a thread of the driver's: the first
    waits for the forkserver to import the lab)."""
    # A pool broken or shut down meanwhile is the search's to report, not this thread's.
    with suppress(Exception):
        for _ in range(workers):
            pool.submit(warm_up)


@dataclass
class Search:
    """What the search found: every schedule drawn up to the break (all of
    them when none broke), the global index of the lowest breaking one, and
    the runs of batches dropped after it."""

    drawn: list[Schedule] = field(default_factory=list)
    broken_at: int | None = None
    discarded_runs: int = 0


class _Drawing:
    """``find``'s condition while the search draws: batches the schedules,
    submits them, tells the outcomes in index order, and says stop (``True``)
    once any batch has broken or the budget is spent."""

    def __init__(self, pool: BatchPool, judge: BatchJudge, deadline: float,
                 judged: Callable[[Judged], None], corpus: Any = None) -> None:
        self.corpus = corpus
        """A guided hunt's corpus (``simulator.search.corpus``): it learns each
        schedule told, and its draws wait here for the schedules they may use."""
        if corpus is not None:
            corpus.wait = self.wait_told
        self.told_through = 0
        """Every schedule numbered below this is judged and told."""
        self.pool = pool
        self.judge = judge
        self.deadline = deadline
        self.judged = judged
        self.search = Search()
        self.pending: list[Schedule] = []
        self.in_flight: dict[Future, Batch] = {}
        self.done: dict[int, BatchOutcome] = {}
        self.batches: list[Batch] = []
        self.told = 0  # batches told so far, in order
        self.first_broken_batch: int | None = None
        self.error: BaseException | None = None

    @property
    def stopped(self) -> bool:
        return (self.first_broken_batch is not None or self.error is not None
                or time.monotonic() > self.deadline)

    def __call__(self, schedule: Schedule) -> bool:
        raise_if_told()  # a stop whose signal landed where Python swallowed it
        if self.stopped:
            return True  # every call from now on, Hypothesis's final one too
        self.search.drawn.append(schedule)
        if self.corpus is not None:
            self.corpus.calls = len(self.search.drawn)
        self.pending.append(schedule)
        if len(self.pending) == self.pool.schedules_per_batch:
            self.submit()
        # Drawing waits while every worker has its share of batches.
        self.collect(block=len(self.in_flight) >= self.pool.workers * BATCHES_PER_WORKER)
        return self.stopped

    def submit(self) -> None:
        if not self.pending:
            return
        batch = Batch(len(self.batches), len(self.search.drawn) - len(self.pending),
                      tuple(self.pending))
        self.pending = []
        self.batches.append(batch)
        deadline_epoch_s = time.time() + (self.deadline - time.monotonic())
        try:
            future = self.pool.executor.submit(judge_batch, self.judge, batch, deadline_epoch_s)
        except Exception as error:  # noqa: BLE001 - a broken pool: raised after the drawing
            self.error = self.error or _judging_error(error, batch)
            return
        self.in_flight[future] = batch

    def collect(self, block: bool) -> None:
        """Take the batches finished (waiting for one if ``block``) and tell
        those whose turn has come."""
        if not self.in_flight:
            return
        finished, _ = wait(list(self.in_flight), timeout=None if block else 0,
                           return_when=FIRST_COMPLETED)
        for future in finished:
            batch = self.in_flight.pop(future)
            if future.cancelled():
                continue
            error = future.exception()
            if error is not None:
                self.error = self.error or _judging_error(error, batch)
                continue
            outcome = future.result()
            self.done[batch.number] = outcome
            if outcome.broken_at is not None and (self.first_broken_batch is None
                                                  or batch.number < self.first_broken_batch):
                self.first_broken_batch = batch.number
        self.drop_after_break()
        self.tell()

    def drop_after_break(self) -> None:
        """Batches after one that broke can only break later: drop them."""
        if self.first_broken_batch is None:
            return
        for future, batch in list(self.in_flight.items()):
            if batch.number > self.first_broken_batch:
                future.cancel()
                del self.in_flight[future]

    def tell(self) -> None:
        while self.search.broken_at is None and self.told in self.done:
            outcome, batch = self.done.pop(self.told), self.batches[self.told]
            for line_index, line in enumerate(outcome.lines):
                reach = outcome.reaches[line_index] if outcome.reaches else None
                self.judged(Judged(line_index == outcome.broken_at, line, reach,
                                   outcome.sames[line_index] if outcome.sames else None))
                if self.corpus is not None:
                    self.corpus.learn(batch.first + line_index, batch.schedules[line_index],
                                      reach)
            if outcome.broken_at is not None:
                self.search.broken_at = batch.first + outcome.broken_at
            self.told += 1
            self.told_through = batch.first + len(batch.schedules)

    def wait_told(self, number: int) -> None:
        """Return once every schedule numbered below ``number`` is judged and
        told, or nothing more will be (the search is over, the budget spent)."""
        while self.told_through < number and not self.stopped:
            if self.pending and len(self.search.drawn) - len(self.pending) < number:
                self.submit()
            if not self.in_flight:
                return
            self.collect(block=True)

    def finish(self) -> Search:
        """After the drawing: the last batches judged, or dropped once one broke."""
        if not self.stopped:
            self.submit()
        while self.in_flight and self.error is None and self.search.broken_at is None:
            self.collect(block=True)
        for future in self.in_flight:
            future.cancel()
        if self.error is not None:
            raise self.error
        if self.search.broken_at is not None:
            del self.search.drawn[self.search.broken_at + 1:]
            self.search.discarded_runs = sum(len(outcome.lines) for outcome in self.done.values())
        return self.search


def _judging_error(error: BaseException, batch: Batch) -> BaseException:
    """What stops the hunt when ``batch`` failed: its own error, or, when its
    worker died under it, a line saying so (not a traceback)."""
    if not isinstance(error, BrokenProcessPool):
        return error
    return SimulationError(
        f"hunt: a worker process died while judging schedules {batch.first}.."
        f"{batch.first + len(batch.schedules) - 1} (killed, or out of memory?); run the "
        "hunt again, with fewer --workers if memory is short")


def search_in_batches(strategy: st.SearchStrategy[Schedule], judge: BatchJudge, seed: int,
                      examples: int, deadline: float, pool: BatchPool,
                      judged: Callable[[Judged], None], corpus: Any = None) -> Search:
    """Draw up to ``examples`` schedules of ``strategy`` with ``seed`` and judge
    them on ``pool`` until the lowest-numbered break (see the module);
    ``judged`` hears of each schedule run before it, in order; ``deadline`` is
    on ``time.monotonic``'s clock."""
    drawing = _Drawing(pool, judge, deadline, judged, corpus)
    try:
        find(strategy, drawing, random=random.Random(seed),
             settings=hunt_settings(examples, [Phase.generate]))
    except NoSuchExample:
        pass  # every schedule drawn, none said stop
    return drawing.finish()


@dataclass(frozen=True)
class BatchPool:
    """Where batches run, how many at once, and how large."""

    executor: Executor
    workers: int
    schedules_per_batch: int = SCHEDULES_PER_BATCH


class _InDriver(Executor):
    """Runs each batch at once, in the driver: a one-worker hunt, as it always was."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - handed to the driver, as a worker's would be
            future.set_exception(error)
        return future


@contextmanager
def batch_pool(workers: int = 1, scheduler: str | None = None,
               preload: Sequence[str] = ()) -> Iterator[BatchPool]:
    """Where a hunt's batches run: in the driver (one worker), in ``workers``
    local processes tied to it, or on the Dask cluster at ``scheduler``
    (``workers`` then caps the batches it runs at once; 1: its thread count).
    ``preload``: the modules a judge needs, imported once for every local
    worker (by the forkserver, when this process starts it)."""
    # Imported here, in the driver: a worker imports this module for
    # judge_batch alone, without the sweeps' own (pandas among them).
    from simulator.sweeps.execute import dask_executor
    from simulator.sweeps.lifeline import Lifeline

    if workers < 1:
        raise ValueError(f"--workers: at least 1, got {workers}")
    if scheduler is not None:
        with dask_executor(scheduler) as (executor, client):
            threads = sum(client.nthreads().values()) or 1
            yield BatchPool(executor, workers if workers > 1 else threads)
        return
    if workers == 1:
        yield BatchPool(_InDriver(), 1, schedules_per_batch=1)
        return
    # forkserver, as a sweep's pool: a clean process, and one import of the
    # lab shared by every worker it forks: this module, the lifeline every
    # worker holds (else each imports the sweeps, pandas and all, a third of
    # a second), and what the judge needs.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, Lifeline.__module__, *preload])
    with Lifeline() as lifeline:
        pool = lifeline.pool(workers, context)
        # The forkserver's import (a second or more) overlaps the baseline run
        # rather than delaying it.
        starting = threading.Thread(target=_start_workers, args=(pool, workers),
                                    name="hunt-workers-start", daemon=True)
        starting.start()
        try:
            yield BatchPool(pool, workers)
        finally:
            # The search is over however the block ends: whatever still runs
            # is of no use, so its workers are cut off rather than waited for.
            lifeline.cut()
            starting.join()
            pool.shutdown(wait=True, cancel_futures=True)
