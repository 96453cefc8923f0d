"""The av_state session-counter family, as the lab knows it: sessions of
tool calls spending on several counters at once, giving back what they did
not use, and clearing their counters at the end (``stores.av_state`` holds
its store and its in-memory twin).

* ``lifecycle`` — the session a gateway replica serves;
* ``oracle`` — the run's oracle: what callers were told against the counters;
* ``books`` — what it keeps per counter, budget, session, call and refund;
* ``judgments`` — a commit past the limit and a false refusal, judged
  when the store decided;
* ``verdict`` — its summary and samples, read off the books;
* ``causes`` — whom the verdict may blame;
* ``observer`` — a server's counter and marker keys, or each replica's
  twin, and the end-of-run check of the books against them;
* ``summary`` and ``timeline`` — how its results read and are drawn;
* ``invariants`` — what ``hunt --reference`` and the counterfactual compare.
"""

from __future__ import annotations

from simulator.families.av_state import lifecycle
from simulator.families.av_state.invariants import INVARIANTS
from simulator.families.av_state.observer import CounterObserver, ReplicaCounters
from simulator.families.av_state.oracle import counter_oracle
from simulator.families.av_state.summary import SUMMARY
from simulator.families.av_state.timeline import LANES
from simulator.net.connections import CONNECTION_EVENTS
from simulator.plugin.family import Family

FAMILY = Family(
    name="av_state",
    protocol="counters",
    serve=lifecycle.serve,
    oracle=counter_oracle,
    server_observer=CounterObserver,
    replica_observer=ReplicaCounters,
    summary=SUMMARY,
    timeline=LANES,
    invariants=INVARIANTS,
    # A scenario may put a replica on one multiplexed connection and fault
    # its connections: what they did is counted.
    counted_events=CONNECTION_EVENTS,
    oracle_facts=frozenset({"opened", "spend_sent", "spend_answered", "tally_sent",
                            "tally_answered", "refund_sent", "refund_returned", "cleanup_began",
                            "cleanup_ended", "closed"}),
)
