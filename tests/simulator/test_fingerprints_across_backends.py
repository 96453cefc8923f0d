"""The same scenario and seed give the same trace fingerprint on every
backend (issues 25 and 39): twice on a real ``redis-server``, once on
fakeredis and once on the lab's Valkey engine, for a scenario of every Redis
family (the budget one migrating, so replicas refuse to boot with messages
naming their keys); and the race reports of the Redis families replay with
their recorded fingerprints on the real ``redis-server`` and on fakeredis
(on the engine, the default, ``test_races`` replays every report).
No trace field may carry a run-specific token (a real server's key prefix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from simulator.search.races import load_report, replay

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
SHORT = {
    # Replicas restarted mid-migration refuse to boot, naming the layout key.
    "migrate-v1-to-v2.toml": {"faults.crash.rate": "30/m", "faults.crash.restart_after": "200ms"},
    "leases.toml": {"duration": "3s", "drain": "1s", "fleet.replicas": 10},
    "av-state.toml": {"duration": "1h", "drain": "1h"},
}
REDIS_REPORTS = sorted(path for path in (REPO / "data" / "races").glob("*.toml")
                       if not path.name.startswith("tollgate-"))


@pytest.mark.parametrize("name", SHORT)
def test_a_scenario_gives_one_fingerprint_on_fakeredis_and_twice_on_a_real_server(
        name, redis_url):
    scenario = load_scenario(SCENARIOS / name, SHORT[name])
    fake = run_scenario(scenario, backend="fakeredis").summary
    real = [run_scenario(scenario, backend=redis_url).summary for _ in range(2)]
    real.append(run_scenario(scenario, backend="valkey").summary)
    assert real[-1]["backend"] == "valkey"
    assert fake["call_executed_count"] > 0
    for summary in real:
        assert summary["trace_fingerprint"] == fake["trace_fingerprint"]
        assert {**summary, "backend": ""} == {**fake, "backend": ""}
    if name == "migrate-v1-to-v2.toml":
        assert fake["replica_boot_failed_count"] > 0  # the messages that named the keys


@pytest.mark.parametrize("path", REDIS_REPORTS, ids=[path.stem for path in REDIS_REPORTS])
@pytest.mark.parametrize("server", ["redis", "fakeredis"])
def test_a_redis_family_s_race_report_replays_on_a_real_server_and_on_fakeredis(
        path, server, request):
    """On a real server; a report that breaks only on a cluster, on a real
    throwaway cluster of its shape; and on the embedded fakeredis (a
    simulated cluster's shards each a fakeredis)."""
    report = load_report(path)
    on_cluster = any(name.startswith("server.cluster") for name in report.variant)
    if server == "fakeredis":
        backend = "fakeredis"
    elif on_cluster:
        request.getfixturevalue("redis_cluster_installed")
        backend = "redis-cluster"
    else:
        backend = request.getfixturevalue("redis_url")
    found = replay(report, backend=backend)
    assert found.divergence is None
    assert found.reproduced
    if not on_cluster or server == "fakeredis":  # a real cluster's replay is not fingerprinted
        assert found.result.summary["trace_fingerprint"] == report.fingerprint


CLUSTER_REPORTS = [path for path in REDIS_REPORTS
                   if any(name.startswith("server.cluster") for name in load_report(path).variant)]


@pytest.mark.parametrize("path", CLUSTER_REPORTS, ids=[path.stem for path in CLUSTER_REPORTS])
def test_a_cluster_only_race_report_replays_on_a_real_valkey_cluster(path, request):
    """The reports that break only on a cluster, on a throwaway cluster of the
    engine's Valkey nodes (on redis-server's, above)."""
    from conftest import cluster_or_skip

    found = replay(load_report(path), backend=cluster_or_skip("valkey"))
    assert found.divergence is None
    assert found.reproduced
    assert found.result.summary["backend"] == "valkey-cluster"


def test_runs_side_by_side_on_one_server_give_the_fingerprint_of_a_lone_run(redis_url, tmp_path):
    """Two runs at once on one server (each its own processes and key prefix)
    give what the same run gives alone on fakeredis: the migrating budget
    scenario, whose refusals name its keys."""
    import json
    import subprocess
    import sys

    name = "migrate-v1-to-v2.toml"
    command = [sys.executable, "-m", "simulator", "run", str(SCENARIOS / name), "--quiet",
               "--backend", redis_url]
    for field, value in SHORT[name].items():
        command += ["--set", f"{field}={value}"]
    runs = [subprocess.Popen([*command, "--out", str(tmp_path / str(index))], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for index in range(2)]
    for run in runs:
        _, stderr = run.communicate(timeout=600)
        assert run.returncode in (0, 3), stderr  # 3: an [expect] of the scenario failed
    lone = run_scenario(load_scenario(SCENARIOS / name, SHORT[name]), backend="fakeredis")
    for index in range(2):
        summary = json.loads((tmp_path / str(index) / "summary.json").read_text())
        assert summary["trace_fingerprint"] == lone.summary["trace_fingerprint"]
