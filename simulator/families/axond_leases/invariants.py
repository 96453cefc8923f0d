"""The lease family's invariants: the metrics its stores promise to keep down.

``hunt --reference KIND`` compares a candidate store with a reference on
each of these under the same scenario, seed and schedule: the candidate is
broken where it does strictly worse.

``misaligned_results_accepted`` is ``store_only``: a caller acting on
another command's reply is what the seed's echoed-lease-id check exists to
prevent, whatever the connection did (``contract``), so no fault excuses it.
Nor does any excuse ``lease_keys_without_ttl``: no fault of the lab's acts
inside a script, and the seed's acquire gives its hash an expiry with every
write.
"""

from __future__ import annotations

from simulator.scenario.conditions import NOISY, Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("concurrency_excess_lease_seconds"),
    Invariant("leaked_lease_seconds", noise=NOISY),
    Invariant("false_denials", noise=NOISY),
    Invariant("misaligned_results_accepted", store_only=True),
    Invariant("lease_keys_without_ttl", store_only=True),
)
