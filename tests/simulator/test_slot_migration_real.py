"""A slot moving on a real cluster (issue 29), of redis-server and of Valkey
nodes (issue 39): its nodes answer as the table the simulated nodes are held
to says, and a run with a slot migration gives the same summary on the
simulated and on a real throwaway cluster."""

from __future__ import annotations

import copy

import pytest
import redis
from redis.exceptions import AskError, MovedError, ResponseError, TryAgainError
from scenario_data import BUDGET_FLEET, merge
from slot_migration_cases import A_MOVED, FINISHED, MISSING_IN_SCRIPT, OPENED, SLOT_KEY, A, B

from simulator.backends.local_cluster import ThrowawayCluster, cluster_server
from simulator.backends.slots import shard_of_slot, slot_of, slot_ranges
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

SLOT = slot_of(SLOT_KEY)


def _said(node: redis.Redis, keys: tuple[str, ...], asking: bool, roles: dict[str, int],
          ports: list[int]) -> str:
    pipe = node.pipeline(transaction=False)
    if asking:
        pipe.execute_command("ASKING")
    if len(keys) == 1:
        pipe.get(keys[0])
    else:
        pipe.mget(*keys)
    reply = pipe.execute(raise_on_error=False)[-1]
    if isinstance(reply, TryAgainError):
        return "TRYAGAIN"
    if isinstance(reply, AskError):  # MOVED too: a subclass
        named = ports.index(int(reply.port))
        code = "MOVED" if isinstance(reply, MovedError) else "ASK"
        return f"{code} {next(role for role, index in roles.items() if index == named)}"
    if isinstance(reply, Exception):
        raise reply
    return "served"


def test_a_real_cluster_answers_a_moving_slot_as_the_simulated_one(cluster_backend):
    cluster = ThrowawayCluster(cluster_server(cluster_backend), 3)
    nodes = [redis.Redis.from_url(url, decode_responses=True) for url in cluster.urls]
    try:
        ports = [node.connection_pool.connection_kwargs["port"] for node in nodes]
        ids = [node.execute_command("CLUSTER", "MYID") for node in nodes]
        owner = shard_of_slot(SLOT, slot_ranges(3))  # the cluster splits slots so
        roles = {"old": owner, "new": (owner + 1) % 3, "third": (owner + 2) % 3}
        old, new = nodes[roles["old"]], nodes[roles["new"]]

        def answers(cases: list) -> list[str]:
            return [_said(nodes[roles[role]], keys, asking, roles, ports)
                    for role, keys, asking, _ in cases]

        doomed = "lab:{x}:c"
        old.set(A, "1")
        old.set(doomed, "1")
        new.execute_command("CLUSTER", "SETSLOT", SLOT, "IMPORTING", ids[owner])
        old.execute_command("CLUSTER", "SETSLOT", SLOT, "MIGRATING", ids[roles["new"]])
        assert answers(OPENED) == [case[3] for case in OPENED]
        # A script's command on a key of the slot not there fails, declared or not.
        with pytest.raises(ResponseError, match=MISSING_IN_SCRIPT):
            old.eval("return redis.call('GET', ARGV[1])", 1, A, B)
        with pytest.raises(ResponseError, match=MISSING_IN_SCRIPT):
            old.eval("redis.call('DEL', KEYS[1]); return redis.call('INCR', KEYS[1])", 1,
                     doomed)
        old.execute_command("MIGRATE", "127.0.0.1", ports[roles["new"]], "", 0, 5000,
                            "KEYS", A)
        assert answers(A_MOVED) == [case[3] for case in A_MOVED]
        for node in (old, new, nodes[roles["third"]]):
            node.execute_command("CLUSTER", "SETSLOT", SLOT, "NODE", ids[roles["new"]])
        assert answers(FINISHED) == [case[3] for case in FINISHED]
        assert B not in new.keys("lab:*")
    finally:
        for node in nodes:
            node.close()
        cluster.stop()


V2 = {"store": "axond_budget.redis_v2",
      "store_settings": {"subject_cap_microdollars": 20_000,
                         "namespace_cap_microdollars": 150_000, "reservation_ttl": "1s"},
      "workload": {"keys": {"subjects": 10}}}
MOVES = {
    # One subject's slot moves; the clients follow the redirects, or not.
    "v1-follows": {},
    "v1-does-not-follow": {"server": {"cluster": {"follows_redirects": False}}},
    # A namespace's slot moves, and its new node restarts half-way (its
    # writes under ASKING and the keys it received come back).
    "v2-new-node-restarts": {
        **V2, "faults": {"schedule": [
            {"at": "1s", "fault": "slot_migration", "key": "{ns-0}", "shard": 0,
             "duration": "300ms"},
            {"at": "1200ms", "fault": "server_restart", "shard": 0, "down_for": "20ms"}]},
        "server": {"persistence": "aof-always"}},
    # A namespace's slot moving for 3 s: calls run out of tries (TRYAGAIN).
    "v2-long-move": {**V2, "faults": {"schedule": [
        {"at": "1s", "fault": "slot_migration", "key": "{ns-0}", "shard": 0,
         "duration": "3s"}]}},
}


@pytest.mark.parametrize("name", MOVES)
def test_a_slot_migration_runs_alike_on_the_simulated_and_the_real_cluster(
        cluster_backend, name):
    data = merge(BUDGET_FLEET, {
        "server": {"cluster": {"shards": 3}},
        "faults": {"schedule": [{"at": "1s", "fault": "slot_migration",
                                 "key": "{ns-0|subject-03}", "shard": 0, "duration": "500ms"}]}})
    data = merge(data, copy.deepcopy(MOVES[name]))
    if "store_settings" in MOVES[name]:
        data["store_settings"] = MOVES[name]["store_settings"]
    simulated = run_scenario(parse_scenario(copy.deepcopy(data)), seed=7).summary
    real = run_scenario(parse_scenario(copy.deepcopy(data)), seed=7,
                        backend=cluster_backend).summary
    assert real["backend"] == cluster_backend
    assert {k: v for k, v in real.items() if k != "backend"} == \
        {k: v for k, v in simulated.items() if k != "backend"}
    assert real["keys_migrated"] > 0 and real["cluster_redirects"] > 0
