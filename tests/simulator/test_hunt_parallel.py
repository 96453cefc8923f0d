"""``hunt --workers N`` and ``hunt --scheduler``: the search judged in numbered
batches on several processes or a Dask cluster finds what a one-process hunt
finds, writes the same report, takes the lowest-numbered break whichever
batch finishes first, shrinks without judging a schedule twice, and leaves no
worker behind when its driver is killed; bad flags are one line, exit 2."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, find
from hypothesis.errors import NoSuchExample
from test_no_orphans import assert_sigkill_leaves_nothing

from simulator.cli import main
from simulator.scenario.conditions import Expectation, parse_condition
from simulator.search.batches import Judged, Search, batch_pool, hunt_settings, search_in_batches
from simulator.search.hunt import CallTargets, Hunt, Judge
from simulator.sweeps import execute

REPO = Path(__file__).resolve().parents[2]
SPLIT = REPO / "data" / "scenarios" / "hunt" / "split-settlement-quiet.toml"
DRIFT = Expectation.parse("conservation_drift_microdollars_total", "< 0")
CALLS = CallTargets(("reserve_v1", "settle_v1"), ())


def _strategy() -> Any:
    hunt = Hunt(SPLIT, DRIFT, kinds=("lose_reply", "crash"), max_faults=3)
    return hunt.strategy(CALLS)


def _drawn(count: int, seed: int = 0) -> list[list[dict[str, Any]]]:
    """The first ``count`` schedules a hunt with ``seed`` draws, no run made."""
    drawn: list[list[dict[str, Any]]] = []

    def never(schedule: list[dict[str, Any]]) -> bool:
        drawn.append(schedule)
        return False

    with pytest.raises(NoSuchExample):
        find(_strategy(), never, random=random.Random(seed),
             settings=hunt_settings(count, [Phase.generate]))
    return drawn


@dataclass(frozen=True)
class Scripted:
    """A judge without simulations: the schedules named break; each takes the
    seconds named (default none). Picklable, so workers judge with it."""

    broken: frozenset[str]
    seconds: tuple[tuple[str, float], ...] = ()
    plugins: tuple[str, ...] = ()

    def breaks(self, schedule: list[dict[str, Any]]) -> Judged:
        key = json.dumps(schedule, sort_keys=True)
        time.sleep(dict(self.seconds).get(key, 0.0))
        broken = key in self.broken
        return Judged(broken, f"{len(schedule)} fault(s){' BROKEN' if broken else ''}")


def _key(schedule: list[dict[str, Any]]) -> str:
    return json.dumps(schedule, sort_keys=True)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_lowest_numbered_break_wins_even_when_a_later_batch_finishes_first(workers):
    drawn = _drawn(40)
    early, late = drawn[13], drawn[20]
    assert _key(early) != _key(late) and _key(early) not in map(_key, drawn[:13])
    # The early break is slow and the late one instant: with two workers the
    # late batch is done long before the early one.
    judge = Scripted(frozenset({_key(early), _key(late)}), ((_key(early), 1.5),))
    told: list[Judged] = []
    with batch_pool(workers) as pool:
        search = search_in_batches(_strategy(), judge, 0, 40, time.monotonic() + 120, pool,
                                   told.append)
    assert search.broken_at == 13
    assert search.drawn == drawn[:14]
    # Told in order: thirteen schedules that held, then the break.
    assert [item.broken for item in told] == [False] * 13 + [True]


def test_schedules_drawn_for_the_workers_are_those_a_one_process_hunt_tries():
    drawn = _drawn(30, seed=7)
    judge = Scripted(frozenset())
    told: list[Judged] = []
    with batch_pool(2) as pool:
        search = search_in_batches(_strategy(), judge, 7, 30, time.monotonic() + 120, pool,
                                   told.append)
    assert search.broken_at is None and len(told) == 30
    assert search.drawn == drawn


def test_shrinking_that_draws_otherwise_than_the_search_stops_the_hunt():
    hunt = Hunt(SPLIT, DRIFT)
    wrong = Search(drawn=[[{"at": "999ms", "fault": "crash", "replica": 1,
                            "restart_after": "1s"}]], broken_at=0)
    with pytest.raises(RuntimeError, match="otherwise than the search did"):
        hunt._shrink(_strategy(), wrong)


def test_two_workers_write_the_report_one_writes_and_no_schedule_is_judged_twice(
        tmp_path, capsys, monkeypatch):
    judged: list[tuple[str, bool]] = []
    breaks = Judge.breaks

    def recording(self: Judge, schedule: list[dict[str, Any]]) -> Judged:
        outcome = breaks(self, schedule)
        judged.append((_key(schedule), outcome.broken))
        return outcome

    def hunt(workers: int, name: str) -> tuple[str, str]:
        out = tmp_path / name
        assert main(["hunt", str(SPLIT), "--invariant", "conservation_drift_microdollars_total < 0",
                     "--faults", "lose_reply", "--examples", "30", "--max-faults", "2",
                     "--seed", "2", "--workers", str(workers), "--out", str(out)]) == 0
        return out.read_text(encoding="utf-8"), capsys.readouterr().out

    # One worker judges in this process: every schedule it ran is recorded.
    monkeypatch.setattr(Judge, "breaks", recording)
    alone, alone_printed = hunt(1, "alone.toml")
    # The shrinking judged only schedules not judged before, each once.
    first_break = next(index for index, (_, broken) in enumerate(judged) if broken)
    search = {key for key, _ in judged[:first_break + 1]}
    shrinking = [key for key, _ in judged[first_break + 1:]]
    assert shrinking and len(set(shrinking)) == len(shrinking)
    assert not search & set(shrinking)
    monkeypatch.undo()
    paired, paired_printed = hunt(2, "paired.toml")
    again, _ = hunt(2, "again.toml")
    assert alone == paired == again
    # The same runs counted: "broken with N fault(s) after M run(s)".
    assert alone_printed.splitlines()[0] == paired_printed.splitlines()[0]


def test_workers_import_the_plugin_the_hunted_store_comes_from(tmp_path, capsys, monkeypatch):
    # The plugin is on the driver's path only; the workers are forked from a
    # server that never imported it.
    monkeypatch.syspath_prepend(str(REPO / "docs" / "examples"))
    scenario = tmp_path / "plugged.toml"
    scenario.write_text(SPLIT.read_text(encoding="utf-8").replace(
        'store = "axond_budget.variants.split_settlement"', 'store = "my_team.settle_once"'))
    assert main(["hunt", str(scenario), "--plugin", "my_variant", "--invariant",
                 "requests_arrived < 0", "--examples", "4", "--workers", "2"]) == 1
    assert "no schedule broke it in 5 run(s)" in capsys.readouterr().out


def test_a_hunt_on_a_dask_cluster_finds_what_one_process_finds():
    from distributed import LocalCluster

    def found(**where: Any) -> list[dict[str, Any]]:
        hunt = Hunt(SPLIT, DRIFT, seed=0, examples=20, kinds=("lose_reply",), max_faults=2,
                    **where)
        result = hunt.search()
        assert result is not None
        return result.schedule

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        on_cluster = found(scheduler=cluster.scheduler_address)
    assert on_cluster == found(workers=1)


@pytest.mark.parametrize(("flags", "message"), [
    (["--workers", "0"], "error: --workers: at least 1, got 0"),
    (["--scheduler", "nonsense"], "error: --scheduler: 'nonsense' is no Dask scheduler address"),
    (["--scheduler", "tcp://127.0.0.1:1"],
     "error: cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
])
def test_bad_workers_or_scheduler_is_one_line_exit_2(flags, message, capsys, monkeypatch):
    monkeypatch.setattr(execute, "SCHEDULER_TIMEOUT", "1s")
    assert main(["hunt", str(SPLIT), "--invariant", "conservation_drift_microdollars_total < 0",
                 *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.splitlines()) == 1, err


@pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                    reason="finds a hunt's processes through Linux's /proc")
def test_a_hunt_driver_killed_by_sigkill_leaves_none_of_its_workers(tmp_path):
    # Runs of several seconds, so both workers are mid-run when the driver dies.
    scenario = tmp_path / "long-quiet.toml"
    scenario.write_text(SPLIT.read_text(encoding="utf-8").replace('duration = "1s"',
                                                                  'duration = "8s"'))
    driver = subprocess.Popen(
        [sys.executable, "-m", "simulator", "hunt", str(scenario), "--invariant",
         "requests_arrived < 0", "--examples", "50", "--workers", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert_sigkill_leaves_nothing(driver, workers=2)


def test_one_worker_is_the_default_and_a_misspelt_metric_still_stops_before_any_worker(capsys):
    hunt = Hunt(SPLIT, parse_condition("conservation_drfit < 0"))
    assert hunt.workers == 1 and hunt.scheduler is None
    assert main(["hunt", str(SPLIT), "--invariant", "conservation_drfit < 0",
                 "--workers", "2"]) == 2
    assert "no metric 'conservation_drfit'" in capsys.readouterr().err
