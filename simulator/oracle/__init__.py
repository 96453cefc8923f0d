"""The oracle as the core knows it: what really happened, measured against
what the store recorded.

``protocol`` is the oracle as the core calls it, whatever the family;
``attribution`` is the arithmetic every family's verdict shares (splitting
damage over causes in whole units, ``store_logic`` for what nothing the lab
did explains). A family's own oracle — its truth, its books, its causes —
lives in its package (``simulator.families.<family>``).
"""
