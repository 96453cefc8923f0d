"""Nothing left behind: however a sweep's driver ends, its workers, forkserver
and resource tracker go with it (issue 17). The sweep runs as a real command in
a session of its own; its processes are found there through /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import Proc, left_behind, session_processes

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "data" / "sweeps" / "smoke.toml"
SHORT_THEN_LONG = """
name = "short-then-long"
scenario = "{scenario}"
seeds = 1
[set]
"fleet.replicas" = 30
"workload.arrivals" = "poisson(200/s)"
[vary]
duration = ["3s", "600s"]
"""
"""Two runs: one of seconds, then one of many minutes, under way when the sweep is stopped."""

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="finds a sweep's processes through Linux's /proc")


def start_sweep(sweep: Path, out: Path, *overrides: str, workers: int) -> subprocess.Popen:
    """``sweep``, leading a session of its own. SIGINT as Python starts with it
    (a test run in the background may inherit it ignored)."""
    command = [sys.executable, "-m", "simulator", "sweep", str(sweep), "--out", str(out),
               "--workers", str(workers), "--quiet"]
    for override in overrides:
        command += ["--set", override]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def workers_running(driver: subprocess.Popen, count: int) -> list[Proc]:
    """Wait until ``count`` workers (the forkserver's children, the driver's
    grandchildren) are each inside a simulation, having used CPU."""
    deadline = time.monotonic() + 60
    while True:
        assert driver.poll() is None, driver.communicate()
        processes = session_processes(driver.pid)
        servers = {proc.pid for proc in processes.values() if proc.ppid == driver.pid}
        workers = [proc for proc in processes.values() if proc.ppid in servers]
        if len(workers) >= count and all(proc.cpu_s >= 0.3 for proc in workers):
            return workers
        assert time.monotonic() < deadline, f"no {count} busy workers: {processes}"
        time.sleep(0.1)


def end_session(driver: subprocess.Popen) -> None:
    """Whatever the test found, kill what is left of the sweep and close its pipes."""
    try:
        os.killpg(driver.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    driver.communicate()


def test_a_sweep_driver_killed_by_sigkill_leaves_none_of_its_processes(tmp_path):
    # Runs of ten minutes: every worker is mid-simulation when the driver dies.
    assert_sigkill_leaves_nothing(start_sweep(SMOKE, tmp_path / "out", "duration=600s",
                                              workers=2), workers=2)


def assert_sigkill_leaves_nothing(driver: subprocess.Popen, workers: int) -> None:
    """Once ``workers`` of ``driver``'s are mid-run, SIGKILL the driver: none of
    its processes (workers, forkserver, resource tracker) may remain."""
    try:
        running = workers_running(driver, workers)
        # Driver, resource tracker, forkserver and the workers: all of its processes.
        assert len(session_processes(driver.pid)) >= 3 + len(running)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        assert left_behind(driver.pid) == {}
    finally:
        end_session(driver)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_sweep_told_to_stop_ends_at_once_in_one_line_keeping_its_finished_runs(
        tmp_path, signum):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SHORT_THEN_LONG.format(scenario=REPO / "data" / "scenarios" / "demo.toml"))
    out = tmp_path / "out"
    driver = start_sweep(sweep, out, workers=1)
    try:
        deadline = time.monotonic() + 60
        while not list((out / "runs").glob("*.parquet")):
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "no run finished"
            time.sleep(0.05)
        os.kill(driver.pid, signum)
        # Seconds, not the minutes of the run under way: its worker is cut off.
        _, stderr = driver.communicate(timeout=15)
        assert driver.returncode == 128 + signum, stderr
        assert "Traceback" not in stderr
        name = signal.Signals(signum).name
        assert stderr.splitlines()[-1] == (
            f"sweep short-then-long stopped by {name}: 1 of 2 run(s) finished, kept in "
            f"{out}; run the same command again to run the rest")
        assert len(list((out / "runs").glob("*.parquet"))) == 1
        # Resumable: whole run files only, and no results.parquet claiming the sweep done.
        assert not list(out.rglob("*.tmp"))
        assert not (out / "results.parquet").exists()
        assert left_behind(driver.pid) == {}
    finally:
        end_session(driver)
