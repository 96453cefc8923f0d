"""A hash slot moving between shards (issue 29): what the simulated nodes
answer meanwhile (``ASK``, ``TRYAGAIN``, ``MOVED``, as Redis 7.0's do: the
same table holds a real cluster, ``test_slot_migration_real.py``), clients
that follow redirects or not, and whom a verdict blames."""

from __future__ import annotations

import copy

import pytest
from scenario_data import BUDGET_FLEET, merge
from slot_migration_cases import A_MOVED, FINISHED, MISSING_IN_SCRIPT, OPENED, SLOT_KEY, A, B

from simulator.backends import BackendSpec, open_redis_backend
from simulator.backends.slots import slot_of
from simulator.engine.kernel import Kernel
from simulator.engine.trace import Trace
from simulator.net.cluster import ClusterServer
from simulator.net.server import Command, Server
from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, parse_scenario

SLOT = slot_of(SLOT_KEY)


@pytest.fixture
def cluster():
    kernel, trace = Kernel(1), Trace()
    backends = [open_redis_backend(BackendSpec("fakeredis")) for _ in range(3)]
    yield ClusterServer([Server(kernel, backend, trace) for backend in backends])
    for backend in backends:
        backend.close()


def roles_of(owner: int) -> dict[str, int]:
    """The slot's old node, the one it moves to, and the third."""
    return {"old": owner, "new": (owner + 1) % 3, "third": (owner + 2) % 3}


def said(outcome, roles: dict[str, int], addresses: list[str]) -> str:
    """A node's answer as the case table words it."""
    if outcome.error is None:
        return "served"
    code, *rest = outcome.error.split()
    if code in ("ASK", "MOVED"):
        named = addresses.index(rest[1])
        return f"{code} {next(role for role, index in roles.items() if index == named)}"
    return code


def read(keys: tuple[str, ...]) -> Command:
    return (Command.plain("GET", *keys, keys=keys) if len(keys) == 1
            else Command.plain("MGET", *keys, keys=keys))


def answers(cluster: ClusterServer, roles: dict[str, int], cases: list) -> list[str]:
    return [said(cluster.node_for(read(keys), (roles[role], asking)).execute(read(keys)),
                 roles, cluster.addresses)
            for role, keys, asking, _ in cases]


def test_nodes_answer_a_moving_slot_as_redis_7_does(cluster):
    roles = roles_of(cluster.owner(SLOT))
    assert cluster.execute(Command.plain("SET", A, "1", keys=(A,))).error is None
    # One key to move: handed over half-way, the slot given away at the end.
    cluster.migrate_slot(SLOT, roles["new"], 4_000)
    assert answers(cluster, roles, OPENED) == [case[3] for case in OPENED]
    cluster.kernel.run(3_000)
    assert cluster.shards[roles["new"]].backend.keys("lab:*") == [A]
    assert cluster.shards[roles["old"]].backend.keys("lab:*") == []
    assert answers(cluster, roles, A_MOVED) == [case[3] for case in A_MOVED]
    cluster.kernel.run(5_000)
    assert answers(cluster, roles, FINISHED) == [case[3] for case in FINISHED]
    assert cluster.owner(SLOT) == roles["new"] and cluster.migrator.keys_migrated == 1
    assert cluster.redirects == sum(not case[3].startswith("served")
                                    for case in OPENED + A_MOVED + FINISHED)


def test_a_moved_key_keeps_its_deadline_and_survives_its_new_node_s_restart(cluster):
    roles = roles_of(cluster.owner(SLOT))
    expiring = Command.plain("SET", A, "1", "PX", "60000", keys=(A,))
    assert cluster.execute(expiring).error is None
    deadline = cluster.deadline_us(A)
    cluster.migrate_slot(SLOT, roles["new"], 2_000)
    cluster.kernel.run(3_000)
    new = cluster.shards[roles["new"]]
    assert new.deadline_us(A) == deadline and cluster.deadline_us(A) == deadline
    assert cluster.shards[roles["old"]].deadline_us(A) is None
    new.restart(cluster.kernel.now, "aof-always")
    assert new.backend.keys("lab:*") == [A] and new.deadline_us(A) == deadline
    old = cluster.shards[roles["old"]]
    old.restart(cluster.kernel.now, "aof-always")
    assert old.backend.keys("lab:*") == []  # the move's DEL was kept too


def test_a_script_on_the_old_node_fails_on_a_key_of_the_slot_no_longer_there(cluster):
    roles = roles_of(cluster.owner(SLOT))
    old = cluster.shards[roles["old"]]
    assert cluster.execute(Command.plain("SET", A, "1", keys=(A,))).error is None
    cluster.migrate_slot(SLOT, roles["new"], 4_000)
    # An undeclared key of the slot, not there; a declared one, deleted first.
    sha = old.execute(Command.script_load("return redis.call('GET', ARGV[1])")).value
    assert MISSING_IN_SCRIPT in old.execute(Command.evalsha(sha, (A,), (B,), "get")).error
    body = "redis.call('DEL', KEYS[1]); return redis.call('INCR', KEYS[1])"
    sha = old.execute(Command.script_load(body)).value
    outcome = old.execute(Command.evalsha(sha, (A,), (), "del_then_incr"))
    assert MISSING_IN_SCRIPT in outcome.error
    # Where no slot moves, the same script runs.
    other = "lab:{y}"
    node = cluster.shard_of(other)
    sha = node.execute(Command.script_load(body)).value
    assert node.execute(Command.evalsha(sha, (other,), (), "del_then_incr")).value == 1


MIGRATING = merge(BUDGET_FLEET, {
    "server": {"cluster": {"shards": 3}},
    "faults": {"schedule": [{"at": "1s", "fault": "slot_migration", "key": "{ns-0|subject-03}",
                             "shard": 0, "duration": "500ms"}]}})
"""Thirty subjects' budgets; one subject's slot moves from shard 1 to 0."""


def by_store_logic(summary: dict) -> dict:
    return {key: value for key, value in summary.items()
            if "store_logic" in key and isinstance(value, int | float) and value}


def test_a_sound_store_rides_a_slot_migration_with_a_client_that_follows():
    first = run_scenario(parse_scenario(copy.deepcopy(MIGRATING)), seed=7)
    summary = first.summary
    assert summary["keys_migrated"] == 2 and summary["cluster_redirects"] > 0
    assert summary["call_redirected_count"] == summary["cluster_redirects"]
    assert by_store_logic(summary) == {}
    again = run_scenario(parse_scenario(copy.deepcopy(MIGRATING)), seed=7)
    assert again.summary["trace_fingerprint"] == summary["trace_fingerprint"]
    trace = first.trace.to_table().to_pandas()
    codes = set(trace[trace.kind == "call_redirected"].outcome)
    assert codes == {"ASK", "TRYAGAIN", "MOVED"}
    # Each client learns the slot's new node from one MOVED, then goes there.
    done = trace[trace.kind == "slot_migrated"].time_us.iloc[0]
    moved = trace[(trace.kind == "call_redirected") & (trace.outcome == "MOVED")
                  & (trace.time_us > done)]
    assert len(moved) == moved.replica.nunique()


def test_a_client_that_does_not_follow_redirects_is_the_store_s_damage():
    data = merge(copy.deepcopy(MIGRATING), {"server": {"cluster": {"follows_redirects": False}}})
    summary = run_scenario(parse_scenario(data), seed=7).summary
    assert by_store_logic(summary)
    assert summary["false_denials_exposed_by"].startswith("cluster_refused")
    trace = run_scenario(parse_scenario(data), seed=7).trace.to_table().to_pandas()
    after = trace[trace.time_us > trace[trace.kind == "slot_migrated"].time_us.iloc[0]]
    # It never learns: a call for the slot meets MOVED every time.
    assert (after[after.kind == "cluster_refused"].outcome == "MOVED").sum() > 1


def test_a_slot_that_keeps_moving_under_a_call_makes_the_store_unavailable_not_wrong():
    """v2's scripts name four keys: while some have moved and some not, the
    nodes answer TRYAGAIN until the call's sixteen tries are spent."""
    data = merge(BUDGET_FLEET, {
        "store": "axond_budget.redis_v2",
        "store_settings": {"subject_cap_microdollars": 20_000,
                           "namespace_cap_microdollars": 150_000, "reservation_ttl": "1s"},
        "workload": {"keys": {"subjects": 10}},
        "server": {"cluster": {"shards": 3}},
        "faults": {"schedule": [{"at": "1s", "fault": "slot_migration", "key": "{ns-0}",
                                 "shard": 0, "duration": "3s"}]}})
    data["store_settings"] = {"subject_cap_microdollars": 20_000,
                              "namespace_cap_microdollars": 150_000, "reservation_ttl": "1s"}
    summary = run_scenario(parse_scenario(data), seed=7).summary
    assert summary["call_refused_count"] > 0 and summary["false_denials_store_unavailable"] > 0
    assert by_store_logic(summary) == {}


@pytest.mark.parametrize(("change", "words"), [
    ({"shard": 1}, "is on shard 1 already"),
    ({"shard": 5}, "expected a shard from 0 to 2"),
])
def test_a_slot_migration_the_cluster_cannot_carry_out_is_refused(change, words):
    data = copy.deepcopy(MIGRATING)
    data["faults"]["schedule"][0].update(change)
    with pytest.raises(ScenarioError, match=words):
        parse_scenario(data)


def test_a_run_moves_one_slot_and_only_on_a_cluster():
    twice = copy.deepcopy(MIGRATING)
    twice["faults"]["schedule"].append({**twice["faults"]["schedule"][0], "at": "2s"})
    with pytest.raises(ScenarioError, match="moves one slot"):
        parse_scenario(twice)
    alone = copy.deepcopy(MIGRATING)
    del alone["server"]
    with pytest.raises(ScenarioError, match="not a cluster"):
        parse_scenario(alone)
