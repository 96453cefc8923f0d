"""Mutants of a store kind's own Python classes (``simulator.mutate.python``):
generated from the AST, built as subclasses through ``StoreKind.with_classes``,
probed on the scenario's fault-free run, judged like Lua mutants."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli import main
from simulator.mutate import campaign
from simulator.mutate.campaign import OPERATORS, Options, generate, run_campaign
from simulator.mutate.kinds import mutant_kind, write_plugin
from simulator.mutate.python import (
    PythonMutation,
    class_path,
    class_source,
    mutant_class,
    mutations,
)
from simulator.mutate.python_probe import PythonProber
from simulator.mutate.table import summary_line
from simulator.run.compose import run_scenario
from simulator.run.hang import Hung
from simulator.scenario.model import load_scenario, read_toml
from simulator.search.hunt import Judge
from stores import registry
from stores.tollgate.holder import LeaseHolder
from stores.tollgate.memory import MemoryLedger

REPO = Path(__file__).resolve().parents[2]
TOLLGATE = REPO / "data" / "scenarios" / "hunt" / "tollgate.toml"


class Parent:
    def total(self, amount: int) -> int:
        return amount


class Child(Parent):
    """A class with every Python operator class in it, and a bare ``super()``."""

    def total(self, amount: int) -> int:
        if amount < 0:
            raise ValueError("negative")
        try:
            self.check(amount)
        except KeyError:
            raise
        return super().total(amount) + 1

    def check(self, amount: int) -> None:
        if amount == 13:
            raise KeyError(amount)


def test_each_operator_class_changes_one_place_and_the_diff_has_the_file_s_lines():
    found = mutations(Child)
    assert {mutation.operator for mutation in found} == {
        "relational", "arithmetic", "constant", "call_removed", "condition_negated",
        "exception_swallowed"}
    text, first = class_source(Child)
    lines = inspect.getsource(inspect.getmodule(Child)).splitlines()
    for mutation in found:
        assert mutation.script == f"{__name__}.Child"
        assert mutation.old in lines[mutation.line - 1]  # the file's own line
        removed = [line for line in mutation.diff(text).splitlines()
                   if line.startswith("-") and not line.startswith("---")]
        assert removed == ["-" + lines[mutation.line - 1]]
        assert f"@@ -{mutation.line - 1}," in mutation.diff(text)
    assert mutations(Child) == found  # the same order every time
    assert [m.new for m in found if m.operator == "relational" and m.old == "<"] == ["<=", ">"]
    # Logging is never removed; a `while True` is never negated.
    assert not any("log" in m.old for m in found if m.operator == "call_removed")


def test_a_mutant_is_a_subclass_whose_super_still_points_past_the_original():
    def mutant(operator: str, new: str | None = None) -> Child:
        (mutation,) = [found for found in mutations(Child, (operator,))
                       if new is None or found.new == new]
        cls = mutant_class(Child, mutation)
        assert issubclass(cls, Child) and cls.__name__ == "Child"
        return cls()

    assert Child().total(5) == 6
    assert mutant("arithmetic").total(5) == 4  # super().total(5) - 1: Parent's, not Child's
    assert mutant("constant", "2").total(5) == 7
    assert mutant("exception_swallowed").total(13) == 14  # the KeyError swallowed
    with pytest.raises(KeyError):
        Child().total(13)
    with pytest.raises(ValueError):
        mutant("relational", "<=").total(0)
    assert mutant("condition_negated", "not (amount < 0)").total(-1) == 0
    reached = []
    (removed,) = mutations(Child, ("call_removed",))
    counted = mutant_class(Child, removed, lambda: reached.append(1))()
    assert counted.total(13) == 14 and reached == [1]  # check() not called, the line reached


@pytest.mark.parametrize("kind", ["tollgate.ledger", "axond_budget.redis_v1",
                                  "axond_budget.redis_v2", "av_state.redis",
                                  "axond_leases.redis"])
def test_every_kind_s_own_classes_give_mutants_that_build(kind):
    base = registry.get(kind)
    found = generate(base, OPERATORS, ("python",))
    assert len(found) > 20 and all(isinstance(mutation, PythonMutation) for mutation in found)
    assert {mutation.script for mutation in found} <= {class_path(cls) for cls in base.classes}
    for mutation in found:
        built = mutant_kind(base, f"{kind}.python-probe", mutation)
        assert built.name == f"{kind}.python-probe" and built.protocol == base.protocol


def test_a_python_mutant_registered_as_a_plugin_runs_its_changed_class(tmp_path):
    """The holder billing nothing: every spend is lost to billing."""
    base = registry.get("tollgate.ledger")
    (unbilled,) = [mutation for mutation in mutations(LeaseHolder, ("call_removed",))
                   if "self.pending.append" in mutation.old]
    write_plugin(tmp_path, base.name, [("tollgate.ledger.mutant.9101", unbilled)])
    kind = registry.get("tollgate.ledger.mutant.9101")
    (holder, rules) = kind.classes
    assert issubclass(holder, LeaseHolder) and holder is not LeaseHolder and rules is MemoryLedger
    scenario = load_scenario(TOLLGATE)
    fixed = run_scenario(scenario).summary
    mutant = run_scenario(scenario.model_copy(update={"store": kind.name})).summary
    assert fixed["billing_loss_units"] == 0 < mutant["billing_loss_units"]
    # Held back by a live holder the lab left alone: the store's, not the run's end.
    assert mutant["billing_loss_units_by_store_logic"] == mutant["billing_loss_units"]
    assert mutant["billing_loss_units_exposed_by"] == "no fault"
    assert "never sent" in mutant["store_logic_began"]


def test_the_python_probe_tells_each_outcome_from_the_fault_free_run():
    base = registry.get("tollgate.ledger")
    prober = PythonProber(base, load_scenario(TOLLGATE))
    every = mutations(LeaseHolder)

    def probed(number: int, mutation: PythonMutation) -> str:
        return prober.probe(f"tollgate.ledger.mutant.97{number:02d}", LeaseHolder,
                            mutation).outcome

    (exchange_raise,) = [m for m in every if m.operator == "exception_swallowed"
                         and m.method == "_exchange"]
    assert probed(1, exchange_raise) == "not run"  # no consolidation fails without faults
    (unbilled,) = [m for m in every if "self.pending.append" in m.old]
    assert probed(2, unbilled) == "differs"
    shifted = [m for m in every if m.operator == "relational" and m.old == ">="
               and m.new == ">" and m.method == "spend"]
    assert shifted and probed(3, shifted[0]) == "equivalent"
    broken = PythonMutation(unbilled.script, "call_removed", unbilled.offset, unbilled.old,
                            "pass(", unbilled.line, unbilled.method)
    assert probed(4, broken) == "stillborn"
    # The same mutant probed again (a second campaign in one process) runs its
    # own marker: it differs again, not "not run" on the first probe's marker.
    again = PythonProber(base, load_scenario(TOLLGATE))
    assert again.probe("tollgate.ledger.mutant.9702", LeaseHolder, unbilled).outcome == "differs"


def test_a_campaign_on_a_store_without_lua_mutates_its_python(tmp_path):
    rows = run_campaign(TOLLGATE, Options(operators=("exception_swallowed",), schedules=0,
                                          seconds=60), tmp_path / "out",
                        echo=lambda line: None)
    assert rows and {row.operator for row in rows} == {"exception_swallowed"}
    assert all(row.script.startswith("stores.tollgate.") for row in rows)
    assert all(row.diff.startswith("--- stores/tollgate/") for row in rows)
    assert {row.probe for row in rows} <= {"not run", "equivalent", "differs", "stillborn"}


def test_mutate_says_when_a_kind_has_nothing_to_mutate(capsys):
    in_memory = REPO / "data" / "scenarios" / "in-memory-fleet.toml"
    assert main(["mutate", str(in_memory)]) == 2
    assert "has nothing to mutate" in capsys.readouterr().err
    assert main(["mutate", str(TOLLGATE), "--code", "cobol"]) == 2
    assert "--code: expected lua, python or both" in capsys.readouterr().err


def test_mutate_code_python_mutates_only_the_kind_s_classes(tmp_path):
    table = tmp_path / "out" / "mutants.parquet"
    scenario = REPO / "data" / "scenarios" / "hunt" / "axond-leases.toml"
    assert main(["mutate", str(scenario), "--code", "python", "--operators",
                 "exception_swallowed", "--schedules", "0", "--out", str(tmp_path / "out")]) == 0
    assert set(pd.read_parquet(table)["script"]) == {"stores.axond_leases.limiter.LeaseLimiter"}


def test_a_live_holder_that_keeps_a_lease_until_the_sweep_strands_it_on_its_own_account(tmp_path):
    """A gap mutate found: a holder that never retires its expiring leases
    survived (the sweep reclaims them, their units written off). With the
    lab quiet and every clock true, a sound holder gives a lease back at its
    spend margin: a lease a live holder kept until the sweep is the store's."""
    base = registry.get("tollgate.ledger")
    (kept,) = [mutation for mutation in mutations(LeaseHolder, ("call_removed",))
               if "self.retiring.append(held)" in mutation.old]
    write_plugin(tmp_path, base.name, [("tollgate.ledger.mutant.9401", kept)])
    scenario = load_scenario(TOLLGATE)
    fixed = run_scenario(scenario).summary
    mutant = run_scenario(scenario.model_copy(update={"store": "tollgate.ledger.mutant.9401"})
                          ).summary
    assert fixed["units_stranded"] == 0 and fixed["leases_reclaimed"] == 0
    assert mutant["units_stranded_by_store_logic"] == mutant["units_stranded"] > 0
    assert "never given back" in mutant["store_logic_began"]


def test_a_mutant_that_never_gives_the_simulation_back_is_detected_as_hung(tmp_path):
    """The holder's background loop without its sleep spins at one virtual
    instant: no kernel event runs, so only a wall-clock bound stops it. The
    probe says so and the campaign counts it detected, without a hunt."""
    prober = PythonProber(registry.get("tollgate.ledger"), load_scenario(TOLLGATE))
    prober.bound_s = 2.0
    (spinning,) = [mutation for mutation in mutations(LeaseHolder, ("call_removed",))
                   if "sleep_ms(settings.flush_every_ms)" in mutation.old]
    probed = prober.probe("tollgate.ledger.mutant.9501", LeaseHolder, spinning)
    assert probed.outcome == "hangs" and "no progress within 2 s" in probed.detail
    assert not probed.judged


def test_a_hunt_bounds_each_run_where_it_runs_and_hung_crosses_processes(monkeypatch):
    """With ``--workers``, a schedule runs in a worker process: the bound is
    the judge's own (``Judge.run_bound_s``), and the ``Hung`` it raises there
    reaches the driver as itself, pickled by its bound."""
    (spinning,) = [mutation for mutation in mutations(LeaseHolder, ("call_removed",))
                   if "sleep_ms(settings.flush_every_ms)" in mutation.old]
    name = "tollgate.ledger.mutant.9502"
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    registry.register(mutant_kind(registry.get("tollgate.ledger"), name, spinning))
    data = {**read_toml(TOLLGATE), "store": name}
    judge = Judge(data, 1, None, None, (), (), run_bound_s=1.0)
    with pytest.raises(Hung, match="no progress within 1 s"):
        judge.run(data, [])
    revived = pickle.loads(pickle.dumps(Hung(2.5)))
    assert isinstance(revived, Hung) and revived.seconds == 2.5
    assert pickle.loads(pickle.dumps(judge)) == judge


def test_a_mutant_whose_ledger_cannot_even_open_is_detected_by_the_probe():
    """A ledger whose constructor drops its books raises while the service
    opens, where no store call's guard can file it: the probe says it raises
    (a campaign counts that detected, as a hung run)."""
    prober = PythonProber(registry.get("tollgate.ledger"), load_scenario(TOLLGATE))
    (unbooked,) = [mutation for mutation in mutations(MemoryLedger, ("relational",))
                   if mutation.method == "__init__"]
    probed = prober.probe("tollgate.ledger.mutant.9601", MemoryLedger, unbooked)
    assert probed.outcome == "raises" and "AttributeError" in probed.detail
    assert not probed.judged  # no hunt: the probe's run already showed it


def test_a_store_that_raises_is_counted_detected_and_blamed_whole(tmp_path, monkeypatch):
    """Only the store changed, so a mutant whose store raises (here, before
    its ledger can open) is the store's whole: a campaign counts it blamed."""
    (unbooked,) = [mutation for mutation in mutations(MemoryLedger, ("relational",))
                   if mutation.method == "__init__"]
    monkeypatch.setattr(campaign, "generate", lambda *args, **kwargs: [unbooked])
    (row,) = run_campaign(TOLLGATE, Options(schedules=0, seconds=60), tmp_path / "out",
                          echo=lambda line: None)
    assert row.detected and row.invariants == campaign.RAISED_VERDICT
    assert row.store_logic_share == 1.0
    assert "1 of them blamed on the store" in summary_line([row])
