"""The contract a family implements, and what every family shares.

``family`` (``Family``: lifecycle, oracle, observers, summary, lanes,
invariants), ``protocol`` (the oracle and observer protocols as the core
calls them), ``attribution`` (splitting damage over causes), ``record_series``
(a family's record against the truth, for the timelines), ``key_mirror``
(the Redis keys a server observer follows, parsed from the server's
post-states and kept decoded: a family says only how its keys decode and
what to report). The layers below
``families/`` hold these and never name a family.
"""
