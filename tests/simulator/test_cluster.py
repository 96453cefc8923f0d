"""The simulated Redis Cluster (issue 29): hash slots as Redis computes them,
a node per shard, ``CROSSSLOT`` for a command whose keys span slots, keyless
commands on one node, and server faults that hit one shard."""

from __future__ import annotations

import copy
import tomllib

import pytest
from hypothesis import given, settings
from scenario_data import BUDGET_FLEET, merge

from simulator.backends import BackendSpec, open_redis_backend
from simulator.backends.redis_backend import sha1
from simulator.backends.slots import CROSSSLOT, HASH_SLOTS, hash_tag, slot_of, slot_ranges
from simulator.engine.kernel import Kernel
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.net.cluster import ClusterServer
from simulator.net.server import Command, Server
from simulator.run.compose import run_scenario
from simulator.run.summary import CLUSTER_FIGURES
from simulator.scenario.conditions import Expectation
from simulator.scenario.faults import ScheduledFault
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.search.hunt import Hunt
from simulator.search.race_report import toml_document
from simulator.search.strategies import SERVER_FAULTS, fault_schedules

# -- hash slots ------------------------------------------------------------------


@pytest.mark.parametrize(("key", "slot"), [
    # Values from the Redis Cluster specification and CLUSTER KEYSLOT.
    ("foo", 12182), ("bar", 5061), ("{user1000}.following", 3443),
    ("{user1000}.followers", 3443), ("123456789", 12739),
])
def test_a_key_s_slot_is_the_one_redis_gives(key, slot):
    assert slot_of(key) == slot


def test_the_hash_tag_is_between_the_first_brace_and_the_next_closing_one():
    assert hash_tag("{a|b}:spent") == "a|b"
    assert hash_tag("x{a}{b}") == "a"
    assert hash_tag("foo{}{bar}") is None  # an empty first tag: the whole key
    assert hash_tag("foo{bar") is None
    assert slot_of("foo{}{bar}") != slot_of("bar")
    assert slot_of("lab:{acme}:namespace:spent") == slot_of("other:{acme}:x") == slot_of("acme")


def test_slots_split_over_primaries_as_redis_cli_splits_them():
    assert slot_ranges(3) == [range(0, 5461), range(5461, 10923), range(10923, 16384)]
    assert slot_ranges(1) == [range(0, HASH_SLOTS)]
    for primaries in (2, 5, 7, 64):
        ranges = slot_ranges(primaries)
        assert [slot for served in ranges for slot in served] == list(range(HASH_SLOTS))
        sizes = {len(served) for served in ranges}
        assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError):
        slot_ranges(0)


# -- the nodes -------------------------------------------------------------------


@pytest.fixture
def cluster():
    kernel, trace = Kernel(1), Trace()
    backends = [open_redis_backend(BackendSpec("fakeredis")) for _ in range(3)]
    shards = [Server(kernel, backend, trace) for backend in backends]
    yield ClusterServer(shards)
    for backend in backends:
        backend.close()


def _set(key: str, value: str) -> Command:
    return Command.plain("SET", key, value, keys=(key,))


def test_a_command_runs_on_its_key_s_shard_only(cluster):
    # One key in each third of the slots.
    keys = {0: "lab:{a}", 1: "lab:{b}", 2: "lab:{c}"}
    assert [cluster.shard_index(key) for key in keys.values()] == [2, 0, 1]
    for key in keys.values():
        assert cluster.execute(_set(key, "1")).error is None
    for index, shard in enumerate(cluster.shards):
        held = shard.backend.keys("lab:*")
        assert held == [key for key in keys.values() if cluster.shard_index(key) == index]


def test_keys_in_two_slots_are_refused_with_crossslot_and_nothing_runs(cluster):
    command = Command.plain("MSET", "lab:{a}", "1", "lab:{b}", "2", keys=("lab:{a}", "lab:{b}"))
    outcome = cluster.execute(command)
    assert outcome.error == CROSSSLOT
    assert cluster.crossslot_refusals == 1
    assert all(shard.backend.keys("lab:*") == [] for shard in cluster.shards)
    refused = cluster.shard_of("lab:{a}")
    assert refused.backend.script_errors == 1 and cluster.first_failed == "MSET"
    # Two keys under one tag share a slot: no refusal.
    together = Command.plain("MSET", "lab:{a}:x", "1", "lab:{a}:y", "2",
                             keys=("lab:{a}:x", "lab:{a}:y"))
    assert cluster.execute(together).error is None


def test_a_scan_sees_one_node_and_a_script_load_reaches_every_node(cluster):
    for key in ("lab:{a}", "lab:{b}", "lab:{c}"):
        cluster.execute(_set(key, "1"))
    scanned = cluster.execute(Command.plain("SCAN", "0", "MATCH", "lab:*")).value[1]
    assert scanned == cluster.shards[0].backend.keys("lab:*") == ["lab:{b}"]
    cluster.execute(Command.script_load("return 1"))
    assert all(len(shard.script_cache) == 1 for shard in cluster.shards)


def test_a_fault_names_its_shard_s_node_or_every_node(cluster):
    assert cluster.nodes(1) == [cluster.shards[1]]
    assert cluster.nodes() == cluster.shards
    cluster.shards[2].down = True
    assert cluster.down and cluster.node_for(_set("lab:{a}", "1")).down
    assert not cluster.node_for(_set("lab:{b}", "1")).down


# -- whole runs ------------------------------------------------------------------

SMALL = merge(BUDGET_FLEET, {"name": "cluster-small", "server": {"persistence": "none"}})


def _on(shards: int | None, schedule: list | None = None, **changes) -> dict:
    data = copy.deepcopy(SMALL)
    data.update(changes)
    if shards is not None:
        data["server"]["cluster"] = {"shards": shards}
    if schedule:
        data["faults"] = {"schedule": schedule}
    return data


def _summary(data: dict) -> dict:
    return run_scenario(parse_scenario(data), seed=5).summary


def _without_cluster_figures(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key not in CLUSTER_FIGURES}


@pytest.mark.parametrize("store", ["axond_budget.redis_v1", "axond_budget.redis_v2"])
def test_a_sound_store_on_a_cluster_runs_as_on_one_server(store):
    settings = dict(SMALL["store_settings"])
    if store.endswith("v2"):
        settings["namespace_cap_microdollars"] = 400_000
    one = _summary(_on(None, store=store, store_settings=settings))
    three = _summary(_on(3, store=store, store_settings=settings))
    assert _without_cluster_figures(three) == _without_cluster_figures(one)
    assert one["shards"] == 1 and one["busiest_shard_share"] == 1.0
    assert three["shards"] == 3 and three["crossslot_refusals"] == 0
    # Thirty subjects' tags spread over the shards (v1); v2 keeps its one
    # namespace on one shard (all but the layout marker's reads at boot).
    busiest = three["busiest_shard_share"]
    assert busiest < 0.6 if store.endswith("v1") else busiest > 0.95, busiest


def test_a_restart_of_one_shard_loses_that_shard_s_holds_only():
    restart = {"at": "1500ms", "fault": "server_restart", "down_for": "0s"}
    every = _summary(_on(3, [restart]))
    shards = [_summary(_on(3, [{**restart, "shard": shard}])) for shard in range(3)]
    lost = [summary["holds_lost_to_data_loss"] for summary in shards]
    assert every["holds_lost_to_data_loss"] > 0
    assert sum(lost) == every["holds_lost_to_data_loss"]
    assert all(0 < part < every["holds_lost_to_data_loss"] for part in lost), lost
    # On one server, the same restart without a shard loses what every shard did.
    assert _summary(_on(None, [restart]))["holds_lost_to_data_loss"] == every[
        "holds_lost_to_data_loss"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"faults": {"schedule": [{"at": "1s", "fault": "server_restart", "shard": 0}]}},
     "the server is not a cluster"),
    ({"server": {"cluster": {"shards": 2}},
      "faults": {"schedule": [{"at": "1s", "fault": "server_restart", "shard": 2}]}},
     "expected a shard from 0 to 1"),
    ({"server": {"cluster": {"shards": 2}},
      "faults": {"schedule": [{"at": "1s", "fault": "crash", "replica": 0, "shard": 1}]}},
     "only server_restart, failover, latency_spike hit a shard"),
    ({"server": {"cluster": {"shards": 2, "replicas_per_shard": 0}},
      "faults": {"schedule": [{"at": "1s", "fault": "failover"}]}},
     "a failover needs a replica to promote"),
    ({"server": {"cluster": {"shards": 0}}}, "shards"),
])
def test_a_shard_the_scenario_cannot_have_is_refused_by_name(changes, message):
    data = copy.deepcopy(SMALL)
    data.update(changes)
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data)


def test_a_simulated_cluster_on_a_real_server_is_refused_with_what_to_do(redis_url):
    with pytest.raises(ScenarioError, match="runs on the lab.s engine or fakeredis"):
        run_scenario(parse_scenario(_on(2)), backend=redis_url)


# -- hunts -----------------------------------------------------------------------


@settings(max_examples=60, database=None)
@given(fault_schedules(replicas=4, until="2s", kinds=SERVER_FAULTS, shards=3))
def test_a_drawn_server_fault_hits_a_shard_of_the_cluster(schedule):
    faults = [ScheduledFault.model_validate(item) for item in schedule]
    assert all(fault.fault in SERVER_FAULTS for fault in faults)
    assert all(fault.shard is not None and 0 <= fault.shard < 3 for fault in faults)


@settings(max_examples=20, database=None)
@given(fault_schedules(replicas=4, until="2s", kinds=SERVER_FAULTS))
def test_on_one_server_a_drawn_server_fault_names_no_shard(schedule):
    assert all("shard" not in item for item in schedule)


def test_a_hunt_on_a_cluster_finds_the_shard_whose_restart_loses_holds(tmp_path):
    scenario = tmp_path / "cluster.toml"
    # No reply loss, spends within their estimates, holds outliving requests:
    # the fault-free run breaks nothing, so what breaks is the restart.
    data = _on(3, network={**SMALL["network"], "reply_loss": 0.0},
               store_settings={**SMALL["store_settings"], "reservation_ttl": "30s"},
               workload={**SMALL["workload"], "actual_microdollars": "uniform(0, 3000)"})
    scenario.write_text(toml_document(data), encoding="utf-8")
    assert tomllib.loads(scenario.read_text(encoding="utf-8")) == data
    hunt = Hunt(scenario, Expectation.parse("holds_lost_to_data_loss", "> 0"), seed=0,
                examples=30, time_budget_s=240, kinds=("server_restart",))
    found = hunt.search()
    assert found is not None
    (restart,) = found.schedule
    assert restart["fault"] == "server_restart" and 0 <= restart.get("shard", 0) < 3
    replayed = run_scenario(parse_scenario({**data, "faults": {"schedule": found.schedule}}),
                            seed=hunt.scenario.seed).summary
    # The report's story names the shard.
    story = hunt.race_report(found, tmp_path / "found.toml").story
    assert f"server restart on shard {restart.get('shard', 0)}" in story
    assert replayed["holds_lost_to_data_loss"] > 0


def test_a_failover_hunt_on_a_cluster_without_replicas_is_refused(tmp_path):
    data = _on(2)
    data["server"]["cluster"]["replicas_per_shard"] = 0
    scenario = tmp_path / "no-replicas.toml"
    scenario.write_text(toml_document(data), encoding="utf-8")
    with pytest.raises(ValueError, match="no replica to promote"):
        Hunt(scenario, Expectation.parse("holds_lost_to_data_loss", "> 0"),
             kinds=("failover",))


# -- keys a script uses without declaring them -------------------------------------


def _key_in(cluster, shard: int, *, not_slot: int | None = None, tag: str = "k") -> str:
    """A key of ``shard``'s slots (not in ``not_slot``)."""
    for number in range(10_000):
        key = f"lab:{tag}{number}"
        if cluster.shard_index(key) == shard and slot_of(key) != not_slot:
            return key
    raise AssertionError("no such key")


def _set_undeclared(declared: str, undeclared: str) -> Command:
    """A script declaring one key and writing another too."""
    body = "redis.call('SET', KEYS[1], '1')\nreturn redis.call('SET', ARGV[1], '1')"
    return Command("EVALSHA", (declared,), (sha1(body), undeclared), "writes_undeclared")


@pytest.mark.parametrize(("where", "error"), [
    ("same slot", None),
    ("same node", "ERR Script attempted to access keys that do not hash to the same slot"),
    ("other node", "ERR Script attempted to access a non local key in a cluster node"),
])
def test_a_script_s_undeclared_key_outside_its_slot_fails_as_redis_fails_it(cluster, where,
                                                                           error):
    declared = "lab:{a}:x"
    shard = cluster.shard_index(declared)
    undeclared = {"same slot": "lab:{a}:y",
                  "same node": _key_in(cluster, shard, not_slot=slot_of(declared)),
                  "other node": _key_in(cluster, (shard + 1) % 3)}[where]
    body = "redis.call('SET', KEYS[1], '1')\nreturn redis.call('SET', ARGV[1], '1')"
    cluster.execute(Command.script_load(body))
    outcome = cluster.execute(_set_undeclared(declared, undeclared))
    assert outcome.error == error
    node = cluster.shards[shard]
    # The command before the refused one ran, as in Redis (a script is not rolled back).
    assert declared in node.backend.keys("lab:*")
    assert (undeclared in node.backend.keys("lab:*")) == (error is None)


def test_the_shim_s_slot_is_redis_py_s_for_any_key(cluster):
    """The shim computes a key's slot in Lua: the one it refuses on agrees
    with ``slot_of`` for keys of every shape (tags, empty tags, bytes > 127)."""
    shard = 0
    node = cluster.shards[shard]
    declared = _key_in(cluster, shard, tag="d")
    body = "return redis.call('GET', ARGV[1])"
    cluster.execute(Command.script_load(body))
    keys = ["foo", "a{}b", "{}{x}", "x{y}{z}", "é{ü}", "{", "}{", *(f"k{n}" for n in range(300))]
    for key in keys:
        outcome = node.execute(Command("EVALSHA", (declared,), (sha1(body), key), "get"))
        served = cluster.shard_index(key) == shard
        same = slot_of(key) == slot_of(declared)
        expected = (None if same
                    else "ERR Script attempted to access keys that do not hash to the same slot"
                    if served
                    else "ERR Script attempted to access a non local key in a cluster node")
        assert outcome.error == expected, key


def test_a_shard_fault_names_its_shard_in_the_trace():
    restart = {"at": "1500ms", "fault": "server_restart", "down_for": "0s", "shard": 2}
    rows = run_scenario(parse_scenario(_on(3, [restart])), seed=5).trace.to_table().to_pylist()
    assert [row["detail"] for row in rows if row["kind"] == "fault_server_restart"] == [
        "shard 2"]


def test_the_counterfactual_tells_each_shard_s_failovers_apart():
    """Damage a shard's failover caused is attributed to that shard: the run
    without one shard's failovers, beside the run without the other's."""
    from simulator.search.counterfactual import counterfactual, fault_classes
    failovers = [{"at": "1s", "fault": "failover", "shard": shard, "lag": "1s",
                  "down_for": "50ms"} for shard in (0, 2)]
    scenario = parse_scenario(_on(3, failovers, network={**SMALL["network"],
                                                         "reply_loss": 0.0}))
    names = [each.name for each in fault_classes(scenario)]
    assert names == ["scheduled failover", "scheduled failover on shard 0",
                     "scheduled failover on shard 2"]
    found = counterfactual(scenario, seed=5)
    lost = {run.fault_class.name: run.summary["holds_lost_to_data_loss"] for run in found.runs}
    baseline = found.baseline["holds_lost_to_data_loss"]
    assert lost["scheduled failover"] == 0 < baseline
    # Each shard's failover lost holds of its own shard: without it, fewer.
    assert 0 < lost["scheduled failover on shard 0"] < baseline
    assert 0 < lost["scheduled failover on shard 2"] < baseline
    assert (lost["scheduled failover on shard 0"] + lost["scheduled failover on shard 2"]
            == baseline)


def test_a_rate_drawn_fault_keeps_its_draws_when_some_shards_are_left_out():
    """``shards`` on a server fault's rate: the same faults are drawn, and only
    those on the listed shards happen -- the others fall as they did."""
    rates = {"server_restart": {"rate": "3/s", "down_for": "10ms"}}
    every = parse_scenario(_on(3, faults=rates))
    some = parse_scenario(_on(3, faults={"server_restart": {**rates["server_restart"],
                                                            "shards": [0, 2]}}))
    streams = lambda: Streams(5)  # noqa: E731 - one fresh set of streams per plan
    drawn = every.planned_faults(streams())
    kept = some.planned_faults(streams())
    assert {fault.shard for fault in drawn} == {0, 1, 2}
    assert kept == [fault for fault in drawn if fault.shard in (0, 2)]
    with pytest.raises(ScenarioError, match="expected shards from 0 to 2"):
        parse_scenario(_on(3, faults={"server_restart": {**rates["server_restart"],
                                                          "shards": [3]}}))


def test_the_counterfactual_tells_each_shard_s_rate_drawn_restarts_apart():
    from simulator.search.counterfactual import counterfactual, fault_classes
    rates = {"server_restart": {"rate": "2/s", "down_for": "20ms"}}
    scenario = parse_scenario(_on(3, faults=rates, network={**SMALL["network"],
                                                            "reply_loss": 0.0}))
    names = [each.name for each in fault_classes(scenario)]
    assert names[:4] == ["server_restart", "server_restart on shard 0",
                         "server_restart on shard 1", "server_restart on shard 2"]
    found = counterfactual(scenario, seed=5)
    lost = {run.fault_class.name: run.summary["holds_lost_to_data_loss"] for run in found.runs}
    baseline = found.baseline["holds_lost_to_data_loss"]
    assert lost["server_restart"] == 0 < baseline
    per_shard = [baseline - lost[f"server_restart on shard {shard}"] for shard in range(3)]
    assert all(part >= 0 for part in per_shard) and sum(per_shard) == baseline
