"""SIGTERM and Ctrl-C on ``run`` and ``hunt`` (issue 25): one line, exit
143 / 130, and the same cleanup as a normal end: on a real Redis, the run's
keys and its Functions library are gone. Each waits until the command is
under way (its keys exist, or its hunt has started running schedules), never
for a wall-clock time."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
UNDER_WAY_WITHIN_S = 120


def started(*command: str) -> subprocess.Popen:
    # SIGINT as Python starts with it (a test run in the background may inherit it ignored).
    return subprocess.Popen([sys.executable, "-m", "simulator", *command], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_until(under_way, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + UNDER_WAY_WITHIN_S
    while not under_way():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "never under way"
        time.sleep(0.1)


def one_line(process: subprocess.Popen, signum: int) -> str:
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr, stderr
    return stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_run_told_to_stop_says_so_and_leaves_nothing_on_the_server(redis_url, tmp_path,
                                                                    signum):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = client.dbsize()
    out = tmp_path / "out"
    run = started("run", str(SCENARIOS / "demo.toml"), "--backend", redis_url, "--out",
                  str(out), "--quiet", "--set", "duration=600s")
    wait_until(lambda: client.dbsize() > before + 100, run)
    run.send_signal(signum)
    line = one_line(run, signum)
    name = signal.Signals(signum).name
    assert line.startswith(f"run stopped by {name}; the run was at t=")
    assert line.endswith("nothing was written, and it cleaned up")
    assert client.dbsize() == before
    assert not [library for library in client.function_list()
                if str(library.get("library_name", "")).startswith("lab_")]
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_hunt_told_to_stop_says_so_in_one_line(tmp_path, signum):
    hunt = started("hunt", str(SCENARIOS / "hunt" / "split-settlement-quiet.toml"), "--invariant",
                   "conservation_drift_microdollars_total < -100000000", "--examples", "500",
                   "--verbose", "--out", str(tmp_path / "out"))
    lines: list[str] = []

    def running() -> bool:
        # Its first schedule's line is out: the hunt is in its search.
        line = hunt.stderr.readline()
        lines.append(line)
        return "run 1" in line or "search" in line

    wait_until(running, hunt)
    hunt.send_signal(signum)
    _, rest = hunt.communicate(timeout=60)
    assert hunt.returncode == 128 + signum, "".join(lines) + rest
    assert "Traceback" not in rest
    assert rest.strip().splitlines()[-1] == f"hunt stopped by {signal.Signals(signum).name}"
