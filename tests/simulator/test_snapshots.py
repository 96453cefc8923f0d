"""Runs branched from snapshots (``simulator.run.snapshots``) are the runs
from t = 0 with the same faults, for every family and for a first fault on
a snapshot's own instant; a run that cannot branch is told apart; a ladder's
processes end with it, and with the process that asked, however it died."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from processes import left_behind

from simulator.run.compose import Run, run_scenario
from simulator.run.snapshots import (
    FIRST_RUNG,
    RUNGS,
    SnapshotLadder,
    divergence_us,
    forkable,
)
from simulator.scenario.conditions import parse_condition
from simulator.scenario.model import Scenario, parse_scenario, read_toml
from simulator.search.hunt import Hunt, PhaseSummary, calls_sent

REPO = Path(__file__).resolve().parents[2]
HUNTS = REPO / "data" / "scenarios" / "hunt"
PLAIN = ["axond-budget", "axond-leases", "av-state", "tollgate"]
"""One committed plain hunt scenario per family."""

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
                                reason="snapshots are forked processes, found through /proc")


def scheduled(data: dict[str, Any], schedule: list[dict[str, Any]]) -> Scenario:
    data = copy.deepcopy(data)
    data.setdefault("faults", {})["schedule"] = schedule
    return parse_scenario(data)


def faults_from(first_us: int, scenario: Scenario, call: str) -> list[dict[str, Any]]:
    """A crash, a lost reply of ``call`` and a pause, the first two at ``first_us``."""
    later = min(first_us + scenario.duration_us // 5, scenario.duration_us - 1)
    return [{"at": f"{first_us}us", "fault": "crash", "replica": 1, "restart_after": "200ms"},
            {"at": f"{first_us}us", "fault": "lose_reply", "replica": 2, "call": call,
             "count": 2},
            {"at": f"{later}us", "fault": "pause", "replica": 3, "duration": "300ms"}]


@pytest.mark.parametrize("name", PLAIN)
def test_a_branched_run_is_the_run_from_t0_with_the_same_faults(name):
    data = read_toml(HUNTS / f"{name}.toml")
    trunk = parse_scenario(data)
    call = calls_sent(run_scenario(trunk).trace).replicas[0]
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        instants = ladder.instants
        for first_us, rung in ((instants[2], 2), ((instants[5] + instants[6]) // 2, 5)):
            other = scheduled(data, faults_from(first_us, trunk, call))
            assert ladder.rung_for(other) == rung
            branched = ladder.run(other, rung)
            alone = run_scenario(other).summary
            assert branched.error is None
            assert branched.summary == alone  # its fingerprint included
            assert alone["fault_crash_count"] == 1
        assert ladder.branched == 2
        assert ladder.private_bytes() > 0  # the trunk and its keepers hold pages of their own


def test_a_branched_run_on_a_simulated_cluster_is_the_run_from_t0():
    """Each shard a fakeredis of its own in the trunk's process: forked with
    it, and a shard's failover scheduled from the snapshot on."""
    data = read_toml(HUNTS / "axond-budget.toml")
    data["server"] = {"cluster": {"shards": 3}}
    trunk = parse_scenario(data)
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        first_us = ladder.instants[3]
        other = scheduled(data, [{"at": f"{first_us}us", "fault": "failover", "shard": 2,
                                  "lag": "500ms", "down_for": "50ms"}])
        branched = ladder.run(other, 3)
        alone = run_scenario(other).summary
        assert branched.error is None
        assert branched.summary == alone
        assert alone["fault_failover_count"] == 1 and alone["shards"] == 3


def test_a_branched_run_with_a_slot_migration_is_the_run_from_t0():
    """A slot moving from the snapshot on (a v2 namespace's: the scenario has
    migrated to v2 by then): the migration's moves and the clients'
    redirects follow in the fork as in a run from t = 0."""
    data = read_toml(HUNTS / "axond-budget.toml")
    data["server"] = {"cluster": {"shards": 3}}
    trunk = parse_scenario(data)
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        first_us = ladder.instants[3]
        other = scheduled(data, [{"at": f"{first_us}us", "fault": "slot_migration",
                                  "key": "{acme|eu}", "shard": 0,
                                  "duration": "1s"}])
        branched = ladder.run(other, 3)
        alone = run_scenario(other).summary
        assert branched.error is None
        assert branched.summary == alone
        assert alone["keys_migrated"] > 0 and alone["cluster_redirects"] > 0


def test_a_run_paused_and_given_other_faults_in_process_is_the_run_with_them_from_t0():
    """``Run.branch`` alone, with no fork: faults replaced, removed and added,
    including one exactly at the instant the run reached."""
    data = read_toml(HUNTS / "axond-leases.toml")
    base = [{"at": "900ms", "fault": "lose_request", "replica": 4, "count": 1},
            {"at": "2s", "fault": "crash", "replica": 0}]
    other = [{"at": "900ms", "fault": "lose_request", "replica": 4, "count": 1},
             {"at": "1200ms", "fault": "pause", "replica": 5, "duration": "150ms"}]
    run = Run(scheduled(data, base))
    run.advance(1_200_000)  # every event before 1.2 s has run; the pause comes at 1.2 s
    run.branch(scheduled(data, other))
    run.advance(run.end_us + 1)
    assert run.finish().summary == run_scenario(scheduled(data, other)).summary


def test_what_cannot_branch_is_told_apart():
    data = read_toml(HUNTS / "axond-leases.toml")
    trunk = parse_scenario(data)
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        early = scheduled(data, [{"at": "1ms", "fault": "crash", "replica": 0}])
        assert ladder.rung_for(early) is None  # before the first snapshot
        slower = copy.deepcopy(data)
        slower["network"]["timeout"] = "300ms"
        assert divergence_us(trunk, parse_scenario(slower), trunk.seed) is None
        assert ladder.rung_for(parse_scenario(slower)) is None  # not a fault: no branch
        assert divergence_us(trunk, trunk, trunk.seed) == trunk.end_us + 1
        assert ladder.rung_for(trunk) == len(ladder.instants) - 1
        assert ladder.branched == 0 and ladder.private_bytes() == 0  # nothing forked
    assert forkable(trunk) is None
    assert "redis://127.0.0.1:1" in forkable(trunk, "redis://127.0.0.1:1")


def test_a_trunk_that_stopped_leaves_its_rungs_to_the_run_from_t0():
    """A trunk refused before it began (its event limit): no rung answers,
    and the run from t = 0 says why."""
    data = read_toml(HUNTS / "axond-leases.toml")
    data.setdefault("limits", {})["max_events"] = 100
    trunk = parse_scenario(data)
    other = scheduled(data, [{"at": "2900ms", "fault": "crash", "replica": 0}])
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder:
        assert ladder.summary_of(other) is None
        assert ladder.rungs_alive == len(ladder.instants) - 1  # the rung asked is known gone
    with pytest.raises(Exception, match="max_events"):
        run_scenario(other)


def test_an_error_in_a_branch_is_raised_where_the_run_was_asked(monkeypatch):
    data = read_toml(HUNTS / "tollgate.toml")
    trunk = parse_scenario(data)

    def broken_finish(self: Run) -> Any:
        raise ArithmeticError("the books do not add up")

    monkeypatch.setattr(Run, "finish", broken_finish)  # forked with the trunk: the branch has it
    other = scheduled(data, [{"at": "5s", "fault": "crash", "replica": 0}])
    with SnapshotLadder.evenly(trunk, trunk.seed) as ladder, \
            pytest.raises(ArithmeticError, match="do not add up"):
        ladder.summary_of(other)


def test_a_hunt_branches_finds_the_same_as_from_t0_and_says_once_how():
    lines: list[str] = []
    found = {}
    for branching in (True, False):
        hunt = Hunt(HUNTS / "split-settlement-quiet.toml",
                    parse_condition("conservation_drift_microdollars_total < 0"), seed=0,
                    examples=60, time_budget_s=240, kinds=("lose_reply",), branching=branching,
                    progress=PhaseSummary(lines.append))
        result = hunt.search()
        found[branching] = (result.schedule, result.value, hunt.runs)
    assert found[True] == found[False]
    told = [line for line in lines if line.startswith("hunt: snapshots:")]
    assert len(told) == 2
    assert "branches from the last snapshot of the fault-free run" in told[0]
    assert "every schedule runs from t = 0 (snapshots turned off)" in told[1]


ASKER = textwrap.dedent("""
    import sys
    from simulator.run.snapshots import SnapshotLadder
    from simulator.scenario.model import load_scenario
    trunk = load_scenario(sys.argv[1])
    ladder = SnapshotLadder.evenly(trunk, trunk.seed)
    ladder.run(trunk, len(ladder.instants) - 1)  # every keeper forked
    print(ladder._trunk_pid, flush=True)
    if sys.argv[2] == "close":
        ladder.close()
        print("closed", flush=True)
    sys.stdin.read()  # until the test kills it
""")


@pytest.mark.parametrize("how", ["close", "sigkill"])
def test_a_ladders_processes_end_when_it_closes_or_its_asker_is_killed(how):
    asker = subprocess.Popen([sys.executable, "-c", ASKER, str(HUNTS / "tollgate.toml"), how],
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        trunk_pid = int(asker.stdout.readline())
        if how == "close":
            assert asker.stdout.readline().strip() == "closed"
            assert not _alive_in_group(trunk_pid)  # closing waited for them
        else:
            # The trunk and a keeper per snapshot.
            assert len(_alive_in_group(trunk_pid)) == RUNGS - FIRST_RUNG + 1
        os.kill(asker.pid, signal.SIGKILL)
        asker.wait()
        assert not left_behind(asker.pid)
    finally:
        if asker.poll() is None:
            asker.kill()
        asker.wait()


def _alive_in_group(group: int) -> list[int]:
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] not in "ZX" and int(fields[2]) == group:
                alive.append(int(entry.name))
    return alive


def test_a_hunt_on_two_workers_branching_finds_what_one_finds_from_t0():
    """Each worker keeps its own ladder: the same seed still gives the same
    schedule, value and run count as one process running every schedule from t = 0."""
    found = {}
    for workers, branching in ((2, True), (1, False)):
        hunt = Hunt(HUNTS / "split-settlement-quiet.toml",
                    parse_condition("conservation_drift_microdollars_total < 0"), seed=0,
                    examples=60, time_budget_s=240, kinds=("lose_reply",), workers=workers,
                    branching=branching)
        result = hunt.search()
        found[workers] = (result.schedule, result.value, hunt.runs)
    assert found[2] == found[1]
