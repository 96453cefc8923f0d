"""The simulated world of one run: the fleet of replicas, the server, the
faults as they are applied, operator actions, and the requests served.

``world`` (``World``: the fleet, the server and the fault appliers),
``fleet`` (a replica and its incarnations), ``operations`` (migrations),
``requests`` (the requests drawn from the workload).
"""
