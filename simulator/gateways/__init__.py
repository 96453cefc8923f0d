"""Gateway behaviours: the request lifecycle a replica runs against a store,
one module per store protocol (``budget`` today; ``leases`` and ``ledger``
plug in beside it)."""

from simulator.gateways import budget

GATEWAYS = {"budget": budget}
