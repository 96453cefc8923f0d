"""The tollgate ledger family, as the lab knows it: holders funding spends
from leases on one ledger service, billing their usage in batches, releasing
and consolidating leases, sweeping expired ones (``stores.tollgate`` holds
the ledger, in memory and on PostgreSQL, and the holder).

* ``lifecycle`` -- the spend a gateway replica serves;
* ``oracle`` and ``books`` -- holders' truth against the ledger's record;
* ``causes`` -- whom the verdict may blame;
* ``observer`` -- reads the ledger after every transaction of the service
  node, and checks the books against it at the end;
* ``summary``, ``timeline`` and ``invariants`` -- how its results read, are
  drawn and are compared.
"""

from __future__ import annotations

from simulator.families.tollgate import lifecycle
from simulator.families.tollgate.invariants import INVARIANTS
from simulator.families.tollgate.observer import LedgerObserver
from simulator.families.tollgate.oracle import ledger_oracle
from simulator.families.tollgate.summary import SUMMARY
from simulator.families.tollgate.timeline import LANES
from simulator.plugin.family import Family


def _no_replica_observer(oracle: object) -> None:
    # The ledger lives on the service node: replicas keep no record of their own.
    return None


FAMILY = Family(
    name="tollgate",
    protocol="ledger",
    serve=lifecycle.serve,
    oracle=ledger_oracle,
    server_observer=LedgerObserver,
    replica_observer=_no_replica_observer,
    summary=SUMMARY,
    timeline=LANES,
    invariants=INVARIANTS,
    counted_events=("lease_obtained", "spend_refused", "server_state_restored"),
)
