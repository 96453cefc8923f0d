"""The contract a family implements, and what every family shares.

``family`` (``Family``: lifecycle, oracle, observers, summary, lanes,
invariants), ``protocol`` (the oracle and observer protocols as the core
calls them), ``attribution`` (splitting damage over causes), ``record_series``
(a family's record against the truth, for the timelines). The layers below
``families/`` hold these and never name a family.
"""
