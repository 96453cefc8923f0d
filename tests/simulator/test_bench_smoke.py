"""``bench --quick`` runs to the end and prints every line with its ratio (a
smoke test: timings are the bench's to print, never a test's to assert)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import postgres_required
from redis_server import redis_binary, redis_required

from simulator.backends.local_postgres import postgres_binaries
from simulator.bench.families import REDIS_FAMILIES, measure_redis_family
from simulator.bench.service_ceiling import fresh_service
from simulator.bench.workloads import TOLLGATE, BenchWorkload
from simulator.run.compose import run_scenario
from stores.tollgate.domain import Allocation

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(?P<name>[A-Za-z_ ]+): .+ -> .+ = (?P<ratio>\S+)( \(target .+\))?$")
SKIPPED = re.compile(r"^(?P<name>[A-Za-z_ ]+): skipped \(.+\)$")

REDIS_LINES = ["Redis ceiling", "fakeredis", "axond_leases", "axond_leases busy", "av_state",
               "av_state busy", "time per event", "engine time per event"]
"""The budget family's two lines, then each other Redis family's (its
committed scenario, then a busy one), then the cost of an event on each
backend, and on the engine against fakeredis."""
LEDGER_LINES = ["tollgate memory", "tollgate PostgreSQL"]
LAB_LINES = ["kernel", "scale", "hunt", "hunt engines", "reach", "campaign memory",
             "campaign workers"]
"""The lab's own lines."""
TINY = {"duration": "3s", "drain": "3s"}
"""A family's scenario cut to a few seconds, for the tests that run one line."""


def test_the_quick_bench_prints_each_figure_with_its_ratio():
    if redis_binary() is None and not redis_required():
        pytest.skip("no redis-server on PATH: the bench's Redis line cannot be measured")
    finished = subprocess.run([sys.executable, "-m", "simulator", "bench", "--quick"],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    printed = finished.stdout.splitlines()
    measured = [match for match in map(LINE.match, printed) if match]
    skipped = [match["name"] for match in map(SKIPPED.match, printed) if match]
    expected = REDIS_LINES + LEDGER_LINES + LAB_LINES
    if postgres_binaries() is None and not postgres_required():
        # Without PostgreSQL its line is skipped, in one line saying so.
        expected.remove("tollgate PostgreSQL")
        assert skipped == ["tollgate PostgreSQL"], finished.stdout
    else:
        assert skipped == [], finished.stdout
    assert [match["name"] for match in measured] == expected, finished.stdout
    ratios = [float(match["ratio"]) for match in measured]
    assert all(math.isfinite(ratio) and ratio > 0 for ratio in ratios), finished.stdout


def test_a_redis_family_line_says_it_ran_on_fakeredis_when_the_bench_has_no_server():
    workload = BenchWorkload(REDIS_FAMILIES["axond_leases"].scenario, TINY)
    line = measure_redis_family("axond_leases", workload, None, quick=True)
    assert line.name == "axond_leases"
    assert line.figures.startswith("leases on fakeredis,")
    assert line.ratio_name == "lab / direct"
    assert math.isfinite(line.ratio) and line.ratio > 0


def test_recording_the_ledger_transactions_leaves_the_run_unchanged():
    scenario = BenchWorkload(TOLLGATE.scenario, TINY).load(quick=True)
    recorded: list = []
    with_recording = run_scenario(scenario, record_transactions=recorded)
    without = run_scenario(scenario)
    assert with_recording.summary == without.summary
    assert len(recorded) == with_recording.summary["transactions_executed"] > 0


def test_the_ledger_replay_meets_the_state_the_run_did():
    """Replayed in order against a fresh ledger, the recorded transactions grant
    exactly the leases the run's ledger granted (acquires and consolidations)."""
    scenario = BenchWorkload(TOLLGATE.scenario, TINY).load(quick=True)
    recorded: list = []
    summary = run_scenario(scenario, record_transactions=recorded).summary
    with fresh_service(scenario, None) as runner:
        replies = [runner.run(runner.service.transact(verb, args, now_ms))
                   for verb, args, now_ms in recorded]
    grants = sum(isinstance(reply, Allocation) for reply in replies)
    assert grants == summary["leases_granted"] + summary["consolidations"] > 0
