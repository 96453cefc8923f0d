"""Sweeps: the design a sweep file names, its parallel runs, and results that
survive a killed sweep or a killed worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError
from simulator.sweeps import build_sweep, load_sweep, read_metrics, read_results, run_sweep

REPO = Path(__file__).resolve().parents[2]

TINY_BASE = """
name = "tiny"
duration = "2s"
drain = "1s"
store = "axond_budget.redis_v1"
[store_settings]
subject_cap_microdollars = 50_000
reservation_ttl = "5s"
[fleet]
replicas = 10
[network]
reply_loss = 0.02
[workload]
arrivals = "poisson(100/s)"
keys = { subjects = 5, namespaces = 1 }
estimate_microdollars = 5000
actual_microdollars = "uniform(0, 6000)"
duration = "lognormal(50ms, 0.5)"
[metrics]
sample_every = "500ms"
"""


def write_sweep(directory: Path, sweep: str, base: str = TINY_BASE) -> Path:
    (directory / "base.toml").write_text(base)
    path = directory / "sweep.toml"
    path.write_text('name = "tiny-sweep"\nscenario = "base.toml"\n' + sweep)
    return path


GRID = """
seeds = 2
[vary]
"network.reply_loss" = [0.0, 0.1]
store_settings.reservation_ttl = { low = "100ms", high = "10s", steps = 3, scale = "log" }
"""


# -- the design ------------------------------------------------------------------


def test_a_grid_runs_every_combination_of_the_values_with_every_seed(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, GRID))
    assert sweep.parameters == ("network.reply_loss", "store_settings.reservation_ttl")
    assert [p.parameters["store_settings.reservation_ttl"] for p in sweep.points[:3]] == [
        "100ms", "1s", "10s"]
    assert len(sweep.points) == 6 and sweep.seeds == (1, 2)
    assert len(sweep.tasks()) == 12
    assert len({task.run_id for task in sweep.tasks()}) == 12


def test_a_random_design_draws_inside_the_ranges_the_same_way_for_the_same_design_seed(
        tmp_path):
    design = """
design = "random"
samples = 8
design_seed = 4
[vary]
"network.reply_loss" = { low = 0.0, high = 0.2 }
"fleet.replicas" = { low = 2, high = 40, integer = true }
"store_settings.reservation_ttl" = ["1s", "30s"]
"""
    first = load_sweep(write_sweep(tmp_path, design))
    again = load_sweep(write_sweep(tmp_path, design))
    assert [p.parameters for p in first.points] == [p.parameters for p in again.points]
    assert len(first.points) == 8
    for point in first.points:
        assert 0.0 <= point.parameters["network.reply_loss"] <= 0.2
        assert isinstance(point.parameters["fleet.replicas"], int)
        assert point.parameters["store_settings.reservation_ttl"] in ("1s", "30s")
    other = load_sweep(write_sweep(tmp_path, design.replace("design_seed = 4",
                                                            "design_seed = 5")))
    assert [p.parameters for p in other.points] != [p.parameters for p in first.points]


def test_a_point_is_known_by_its_values_so_an_edited_sweep_keeps_its_finished_points(
        tmp_path):
    narrow = load_sweep(write_sweep(tmp_path, '[vary]\n"network.reply_loss" = [0.0, 0.1]\n'))
    wide = load_sweep(write_sweep(tmp_path,
                                  '[vary]\n"network.reply_loss" = [0.0, 0.05, 0.1]\n'))
    assert {p.point_id for p in narrow.points} < {p.point_id for p in wide.points}


@pytest.mark.parametrize("sweep, message", [
    ('seeds = 1\nsceanrio = "x"\n[vary]\n"network.reply_loss" = [0.1]\n',
     "sceanrio: unknown field"),
    ('[vary]\n"network.reply_loss" = [0.0, 2.0]\n',
     "network.reply_loss: expected a number from 0 to 1"),
    ('[vary]\n"network.reply_losss" = [0.1]\n', "network.reply_losss: unknown field"),
    ('design = "random"\n[vary]\n"network.reply_loss" = [0.1]\n', "samples: a random design"),
    ('[vary]\n"network.reply_loss" = { low = 0.2, high = 0.1, steps = 2 }\n',
     "vary.network.reply_loss: low (0.2) is above high"),
    ('[vary]\n"network.reply_loss" = { low = 0.1, high = 0.2 }\n',
     "vary.network.reply_loss: a range on a grid design needs steps"),
    ('[vary]\n"network.reply_loss" = []\n', "vary.network.reply_loss: an empty list"),
    ('[vary]\n"network.reply_loss" = 0.1\n', "vary.network.reply_loss: expected a list"),
    ("[vary]\n", "vary: name at least one parameter"),
    ('seeds = 0\n[vary]\n"network.reply_loss" = [0.1]\n', "seeds: at least one seed"),
])
def test_a_bad_sweep_file_is_refused_naming_the_field(tmp_path, sweep, message):
    with pytest.raises(ScenarioError) as refused:
        load_sweep(write_sweep(tmp_path, sweep))
    assert message in str(refused.value)


def test_a_missing_base_scenario_is_named(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('name = "x"\nscenario = "nowhere.toml"\n[vary]\n"seed" = [1]\n')
    with pytest.raises(ScenarioError, match="nowhere.toml: no such base scenario"):
        load_sweep(path)


# -- running it -------------------------------------------------------------------


def test_a_sweep_writes_one_row_per_run_with_its_parameters_and_every_summary_metric(
        tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, GRID), set_fields={"duration": "1s"},
                       vary={"store_settings.reservation_ttl": ["100ms", "10s"]})
    out = tmp_path / "out"
    outcome = run_sweep(sweep, out, workers=2, progress=False)
    assert (outcome.completed, outcome.already_done, outcome.failed) == (8, 0, {})

    frame = pd.read_parquet(out / "results.parquet")
    assert len(frame) == 8
    assert not frame.duplicated(["point", "seed"]).any()
    assert set(frame["store_settings.reservation_ttl_seconds"]) == {0.1, 10.0}
    # Each row is exactly what that scenario and seed give when run alone.
    row = frame[(frame["network.reply_loss"] == 0.1) & (frame["seed"] == 2)
                & (frame["store_settings.reservation_ttl"] == "100ms")].iloc[0]
    alone = run_scenario(sweep.scenario_at(sweep.points[2]), seed=2).summary
    assert sweep.points[2].parameters == {"network.reply_loss": 0.1,
                                          "store_settings.reservation_ttl": "100ms"}
    for name in ("trace_fingerprint", "requests_admitted", "holds_leaked",
                 "cap_overshoot_max_ratio", "conservation_drift_microdollars_total"):
        assert row[name] == alone[name], name
    assert frame["requests_arrived"].gt(0).all()
    assert frame["reply_lost_count"][frame["network.reply_loss"] == 0.1].gt(0).all()

    series = read_metrics(out)
    assert set(series["point"]) == set(frame["point"])
    assert {"time_us", "seed", "true_spend_microdollars"} <= set(series.columns)
    assert len(read_metrics(out, points=[row["point"]])["seed"].unique()) == 2

    again = run_sweep(sweep, out, workers=2, progress=False)
    assert (again.completed, again.already_done) == (0, 8)
    pd.testing.assert_frame_equal(read_results(out), frame)


def test_rates_and_durations_varied_get_numeric_columns_beside_their_text(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, """
seeds = 1
[set]
"faults.crash.restart_after" = "500ms"
[vary]
"faults.crash.rate" = ["0/h", "30/min"]
"store_settings.reservation_ttl" = ["1500ms"]
"""))
    out = tmp_path / "out"
    assert run_sweep(sweep, out, workers=1, progress=False).ok

    frame = read_results(out).set_index("faults.crash.rate")
    assert frame["faults.crash.rate_per_second"].to_dict() == {"0/h": 0.0, "30/min": 0.5}
    assert frame["store_settings.reservation_ttl_seconds"].to_list() == [1.5, 1.5]
    assert "faults.crash.rate_seconds" not in frame
    assert "store_settings.reservation_ttl_per_second" not in frame


def test_a_results_directory_of_another_base_scenario_is_refused(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, '[vary]\n"network.reply_loss" = [0.0]\n'),
                       set_fields={"duration": "500ms"})
    run_sweep(sweep, tmp_path / "out", workers=1, progress=False)
    other = load_sweep(write_sweep(tmp_path, '[vary]\n"network.reply_loss" = [0.0]\n'),
                       set_fields={"duration": "600ms"})
    with pytest.raises(ScenarioError, match="different base scenario"):
        run_sweep(other, tmp_path / "out", workers=1, progress=False)


def test_a_run_that_fails_is_reported_and_the_others_are_kept(tmp_path):
    unreachable = "redis://127.0.0.1:1/0"
    sweep = build_sweep({"name": "mixed", "vary": {"backend": ["fakeredis", unreachable]}},
                        _base_dict())
    outcome = run_sweep(sweep, tmp_path / "out", workers=1, progress=False)
    assert outcome.completed == 1
    assert len(outcome.failed) == 1
    (message,) = outcome.failed.values()
    assert "cannot reach redis://127.0.0.1:1/0" in message
    assert len(read_results(tmp_path / "out")) == 1


def test_a_sweep_runs_the_same_on_a_dask_cluster(tmp_path):
    from distributed import LocalCluster

    sweep = load_sweep(write_sweep(tmp_path, '[vary]\n"network.reply_loss" = [0.0, 0.1]\n'),
                       set_fields={"duration": "1s"})
    run_sweep(sweep, tmp_path / "local", workers=2, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        outcome = run_sweep(sweep, tmp_path / "dask", scheduler=cluster.scheduler_address,
                            progress=False)
    assert (outcome.completed, outcome.failed) == (2, {})
    local = read_results(tmp_path / "local").drop(columns="run_wall_seconds")
    on_dask = read_results(tmp_path / "dask").drop(columns="run_wall_seconds")
    pd.testing.assert_frame_equal(local, on_dask)


# -- nothing lost, nothing twice ----------------------------------------------------------

SLOW_GRID = """
seeds = 3
[set]
duration = "3s"
[vary]
"network.reply_loss" = [0.0, 0.05, 0.1]
"""


def _start_sweep(sweep_file: Path, out: Path, workers: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "simulator", "sweep", str(sweep_file), "--out", str(out),
         "--workers", str(workers), "--quiet"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def _wait_for_runs(out: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while len(list((out / "runs").glob("*.parquet"))) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)


def test_killing_a_sweep_midway_and_running_it_again_loses_and_duplicates_nothing(tmp_path):
    sweep_file = write_sweep(tmp_path, SLOW_GRID)
    out = tmp_path / "out"
    process = _start_sweep(sweep_file, out, workers=1)
    _wait_for_runs(out, 2, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {path.name for path in (out / "runs").glob("*.parquet")}
    assert 2 <= len(finished) < 9

    rerun = subprocess.run(
        [sys.executable, "-m", "simulator", "sweep", str(sweep_file), "--out", str(out),
         "--workers", "2", "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{9 - len(finished)} run now, {len(finished)} already done, 0 failed" in rerun.stdout
    frame = read_results(out)
    assert len(frame) == 9
    assert not frame.duplicated(["point", "seed"]).any()
    assert {path.name for path in (out / "runs").glob("*.parquet")} >= finished
    assert not list(out.rglob("*.tmp"))


def test_a_worker_killed_under_a_run_costs_only_that_run_which_is_run_again(tmp_path):
    sweep_file = write_sweep(tmp_path, SLOW_GRID)
    out = tmp_path / "out"
    process = _start_sweep(sweep_file, out, workers=2)
    _wait_for_runs(out, 1, process)
    driver = psutil.Process(process.pid)
    # The pool's workers are forked by the forkserver, the driver's child.
    workers = [grandchild for child in driver.children()
               for grandchild in child.children()]
    assert workers, "no worker process found"
    workers[0].kill()
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "9 run(s)" in stdout and "0 failed" in stdout
    assert "a worker died: starting new workers" in stderr
    frame = read_results(out)
    assert len(frame) == 9
    assert not frame.duplicated(["point", "seed"]).any()


def _base_dict() -> dict:
    import tomllib

    return tomllib.loads(TINY_BASE) | {"duration": "500ms"}


@pytest.mark.redis
def test_workers_sharing_a_real_redis_each_run_under_their_own_prefix_and_clean_up(
        tmp_path, redis_url):
    import redis

    sweep = build_sweep({"name": "shared", "seeds": 2, "backend": redis_url,
                         "vary": {"network.reply_loss": [0.0, 0.1]}}, _base_dict())
    outcome = run_sweep(sweep, tmp_path / "out", workers=2, progress=False)
    assert (outcome.completed, outcome.failed) == (4, {})
    frame = read_results(tmp_path / "out")
    # The same runs as on fakeredis: a shared server changes nothing but speed.
    alone = run_scenario(sweep.scenario_at(sweep.points[1]), seed=2).summary
    row = frame[(frame["network.reply_loss"] == 0.1) & (frame["seed"] == 2)].iloc[0]
    assert row["trace_fingerprint"] == alone["trace_fingerprint"]
    client = redis.Redis.from_url(redis_url)
    assert list(client.scan_iter(match="lab:*")) == []


def test_raising_a_work_limit_keeps_the_sweeps_results_reusable():
    from simulator.sweeps import load_sweep

    path = REPO / "data" / "sweeps" / "smoke.toml"
    plain = load_sweep(path)
    raised = load_sweep(path, set_fields={"limits.max_events": 500_000_000})
    changed = load_sweep(path, set_fields={"duration": "4s"})
    assert raised.fingerprint == plain.fingerprint
    assert changed.fingerprint != plain.fingerprint


def test_a_metric_only_some_runs_have_is_kept_in_the_results(tmp_path):
    """pyarrow alone takes the first row's columns: a metric that appears as it
    happens (a refusal kind, an exposure) in a later run would be dropped."""
    from simulator.run.results import rows_table
    table = rows_table([{"point": "a", "x": 1}, {"point": "b", "x": 2, "spends_refused_by_z": 3}])
    assert table.column_names == ["point", "x", "spends_refused_by_z"]
    assert table.column("spends_refused_by_z").to_pylist() == [None, 3]
