"""One table of fault kinds (``simulator.scenario.faults.FAULT_KINDS``), read by
every layer that needs to know a fault: each kind is applied, drawn and
estimated as the table says."""

from __future__ import annotations

import typing

import pytest

from simulator.backends.slots import slot_of
from simulator.net.links import CONNECTION_FAULTS
from simulator.run.estimate import planned_faults
from simulator.scenario.faults import FAULT_KINDS, HUNTED_FAULTS, FaultName, Faults, ScheduledFault
from simulator.scenario.model import parse_scenario
from simulator.search.counterfactual import RATE_FAULTS, RESTARTS
from simulator.search.strategies import ALL_FAULTS, REPLICA_FAULTS
from simulator.world.world import World


def test_every_kind_is_applied_by_the_world_or_armed_on_a_link():
    for name, kind in FAULT_KINDS.items():
        applier = getattr(World, f"_{name}", None)
        if kind.operator:  # the run's operations carry it out (Scenario.operations)
            assert applier is None and kind.armed is None and not kind.rated, name
            continue
        assert (kind.armed is None) == callable(applier), name


def test_the_schedule_the_rates_and_the_hunt_speak_the_table():
    assert typing.get_args(FaultName) == tuple(FAULT_KINDS)
    rated = {name for name, kind in FAULT_KINDS.items() if kind.rated}
    assert rated <= set(Faults.model_fields)
    assert set(REPLICA_FAULTS) == {name for name, kind in FAULT_KINDS.items() if kind.hunted}
    assert REPLICA_FAULTS == HUNTED_FAULTS
    operators = {name for name, kind in FAULT_KINDS.items() if kind.operator}
    server = {name for name, kind in FAULT_KINDS.items() if kind.hits_server}
    assert server == {"server_restart", "failover", "latency_spike"}
    assert set(ALL_FAULTS) - set(REPLICA_FAULTS) == {"partition", *CONNECTION_FAULTS,
                                                     *operators, *server}
    assert set(RATE_FAULTS) <= rated and set(RESTARTS) <= set(RATE_FAULTS)


def test_a_scheduled_fault_needs_what_its_kind_says():
    for name, kind in FAULT_KINDS.items():
        bare = {"at": "1s", "fault": name}
        if kind.needs_duration:
            bare["duration"] = "1s"
        if name == "migrate":
            bare["step"] = 0  # which [[migrations]] entry: its one required field
        if name == "reconfigure":
            bare["settings"] = {"subject_cap_microdollars": 1}  # what it changes: required
        if name == "slot_migration":
            bare.update(slot=0, shard=1)  # which slot, and where to: required
        try:
            ScheduledFault.model_validate(bare)
            refused = False
        except ValueError:
            refused = True
        assert refused == kind.targets_replicas, name


def test_a_slot_migration_names_its_slot_once_and_where_it_goes():
    base = {"at": "1s", "fault": "slot_migration", "duration": "1s"}
    for missing in ({"slot": 0}, {"shard": 1}, {"slot": 0, "key": "{a}", "shard": 1}):
        with pytest.raises(ValueError, match="needs `shard`"):
            ScheduledFault.model_validate({**base, **missing})
    by_key = ScheduledFault.model_validate({**base, "key": "{a}", "shard": 1})
    assert by_key.moving_slot == slot_of("a") == slot_of("lab:x:{a}:y")


def test_the_estimate_draws_per_replica_kinds_for_every_replica():
    data = {"name": "t", "store": "axond_budget.redis_v1", "duration": "10s",
            "fleet": {"replicas": 10},
            "faults": {"crash": {"rate": "1/s"}, "failover": {"rate": "1/s"}}}
    counts = {field: count for field, count, _ in planned_faults(parse_scenario(data))}
    assert counts["faults.crash.rate"] == 10 * counts["faults.failover.rate"]


def test_one_set_says_after_which_message_faults_a_caller_may_not_know():
    from simulator.families.av_state.causes import HIDDEN
    from simulator.families.axond_leases.causes import ATTEMPT_ENDS, CALL_FAILURES
    from simulator.net.links import CALLER_KNOWS, CALLER_MAY_NOT_KNOW, MESSAGE_FAULTS
    assert CALLER_MAY_NOT_KNOW | CALLER_KNOWS == MESSAGE_FAULTS
    assert not CALLER_MAY_NOT_KNOW & CALLER_KNOWS
    # A re-send, a slowed reply and one after the caller gave up leave it knowing.
    assert CALLER_KNOWS == {"call_retried", "duplicate_execution", "slow_reply", "late_reply",
                            "cluster_refused"}
    # The families read the one set rather than lists of their own.
    assert HIDDEN is CALLER_MAY_NOT_KNOW is CALL_FAILURES
    assert ATTEMPT_ENDS <= CALLER_MAY_NOT_KNOW
