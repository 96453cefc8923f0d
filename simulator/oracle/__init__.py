"""The oracle: what really happened, measured against what the store recorded.

``protocol`` is the oracle as the core calls it, whatever the family.
``budget`` and ``scoped`` hold the budget family's truth and metrics;
``attribution`` and ``leaks`` are its arithmetic (the budget family's package,
``simulator.families.axond_budget``, builds that oracle and feeds it the
store's record).
"""
