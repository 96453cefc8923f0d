"""The same scenario and seed give the same trace fingerprint on every
backend (issue 25): twice on a real ``redis-server`` and once on fakeredis,
for a scenario of every Redis family (the budget one migrating, so replicas
refuse to boot with messages naming their keys); and the race reports of the
Redis families replay on the real server with their recorded fingerprints.
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
    assert fake["call_executed_count"] > 0
    for summary in real:
        assert summary["trace_fingerprint"] == fake["trace_fingerprint"]
        assert {**summary, "backend": ""} == {**fake, "backend": ""}
    if name == "migrate-v1-to-v2.toml":
        assert fake["replica_boot_failed_count"] > 0  # the messages that named the keys


@pytest.mark.parametrize("path", REDIS_REPORTS, ids=[path.stem for path in REDIS_REPORTS])
def test_a_redis_family_s_race_report_replays_on_a_real_server(path, redis_url):
    found = replay(load_report(path), backend=redis_url)
    assert found.divergence is None
    assert found.reproduced
