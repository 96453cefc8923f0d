"""The axond concurrency-lease family, as the lab knows it: acquire a lease,
run, let go of the permit (``stores.axond_leases`` holds its store).

* ``lifecycle`` — the request a gateway replica serves;
* ``oracle`` — the run's oracle: callers holding against the leases counted;
* ``books`` — what it keeps per request, per lease and per key;
* ``excess`` and ``leaks`` — concurrency excess and leaked leases, by cause;
* ``causes`` — whom the verdict may blame;
* ``retirements`` — an answer read off a retired connection: was the
  retirement warranted, and what exposed it;
* ``observer`` — a server's lease hashes, mapped to lease keys, and the
  end-of-run check of the books against them;
* ``summary`` and ``timeline`` — how its results read and are drawn;
* ``invariants`` — what ``hunt --reference`` and the counterfactual compare.
"""

from __future__ import annotations

from simulator.families.axond_leases import lifecycle
from simulator.families.axond_leases.invariants import INVARIANTS
from simulator.families.axond_leases.observer import LeaseObserver, NoReplicaStores
from simulator.families.axond_leases.oracle import lease_oracle
from simulator.families.axond_leases.summary import SUMMARY
from simulator.families.axond_leases.timeline import LANES
from simulator.net.connections import CONNECTION_EVENTS
from simulator.plugin.family import Family

FAMILY = Family(
    name="axond_leases",
    protocol="leases",
    serve=lifecycle.serve,
    oracle=lease_oracle,
    server_observer=LeaseObserver,
    replica_observer=NoReplicaStores,
    summary=SUMMARY,
    timeline=LANES,
    invariants=INVARIANTS,
    counted_events=CONNECTION_EVENTS,
    oracle_facts=frozenset({"arrived", "admitted", "denied", "cancelled", "completed",
                            "answered_untrusted"}),
)
