"""The axond budget family, as the lab knows it: reserve an estimate, run,
settle the actual spend (``stores.axond_budget`` holds its stores).

* ``lifecycle`` — the request a gateway replica serves;
* ``oracle`` — the run's oracle (one ``scope_oracle.ScopeOracle`` per
  cap scope, the subjects and, with a namespace cap, the namespaces);
* ``observer`` — a server's ledger keys, mapped to budget keys and roles;
* ``in_process`` — the replicas' own stores, read after every call;
* ``mirror`` — the end-of-run comparison of the oracle's books with the stores;
* ``summary`` and ``timeline`` — how its results read and are drawn;
* ``invariants`` — what ``hunt --reference`` and the counterfactual compare;
* ``scope_oracle`` — the truth and the record of one cap scope, and their
  verdict; ``causes`` whom it may blame; ``leaks`` leaked holds over time.
"""

from __future__ import annotations

from simulator.families.axond_budget import lifecycle
from simulator.families.axond_budget.in_process import ReplicaLedgers
from simulator.families.axond_budget.invariants import INVARIANTS
from simulator.families.axond_budget.observer import LedgerObserver
from simulator.families.axond_budget.oracle import budget_oracle
from simulator.families.axond_budget.summary import SUMMARY
from simulator.families.axond_budget.timeline import LANES
from simulator.plugin.family import Family

FAMILY = Family(
    name="axond_budget",
    protocol="budget",
    serve=lifecycle.serve,
    oracle=budget_oracle,
    server_observer=LedgerObserver,
    replica_observer=ReplicaLedgers,
    summary=SUMMARY,
    timeline=LANES,
    invariants=INVARIANTS,
    migration_totals=(("migration_carried_microdollars", "carried_microdollars"),),
    oracle_facts=frozenset({"arrived", "admitted", "denied", "completed", "settled"}),
)
