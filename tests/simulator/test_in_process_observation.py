"""Stores kept in the replicas are followed exactly and checked at the end.

After each call the budget family reads the replica's whole in-memory store,
not only the ledger the call named: the store evicts other keys' ledgers to
make room, and the oracle must see that spend go. At the end of the run the
oracle's books are compared with every live replica's store, key by key, as
a server's keys are.
"""

from __future__ import annotations

import pytest

from simulator.engine.kernel import SimulationError
from simulator.families.axond_budget.in_process import ReplicaLedgers
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

CROWDED = {
    "name": "crowded-in-memory",
    "duration": "3s",
    "drain": "1s",
    "store": "axond_budget.in_memory",
    # Four ledgers a replica, forty subjects, idle ledgers evictable at once:
    # almost every new key evicts another key's ledger, spend and all.
    "store_settings": {"subject_cap_microdollars": 50_000, "max_subjects": 4,
                       "idle_ttl": "1ms", "reservation_ttl": "2s"},
    "fleet": {"replicas": 3},
    "workload": {"arrivals": "poisson(300/s)", "keys": {"subjects": 40},
                 "estimate_microdollars": 1_000, "actual_microdollars": 1_000,
                 "duration": "lognormal(20ms, 0.5)"},
}


def test_ledgers_a_call_evicts_leave_the_oracles_books_as_they_leave_the_store():
    summary = run_scenario(parse_scenario(CROWDED), seed=4).summary
    # The run ended, so the books matched every store key by key; the spend the
    # stores forgot is the oracle's recorded spend no longer, but still true.
    assert summary["recorded_spend_microdollars_total"] < summary["true_spend_microdollars_total"]
    assert summary["conservation_drift_microdollars_total"] == (
        summary["recorded_spend_microdollars_total"] - summary["true_spend_microdollars_total"])


def test_an_observer_that_reads_only_the_key_a_call_named_is_caught_at_the_end(monkeypatch):
    def only_the_named_ledger(self, replica, tag, touched):
        spent, holds = {(key.namespace, key.subject): (ledger.spent_microdollars, ledger.holds)
                        for key, ledger in replica.kind.read_ledgers(replica.store).items()
                        }.get(touched, (0, {}))
        self.oracle.observe(touched, replica.source, replica.kernel.now, tag, "command",
                            spent=spent, holds=holds)

    monkeypatch.setattr(ReplicaLedgers, "after_call", only_the_named_ledger)
    with pytest.raises(SimulationError, match="a lab bug"):
        run_scenario(parse_scenario(CROWDED), seed=4)
