"""The budget family's causes: whom the verdict may blame for each kind of damage.

Every cause but ``store_logic`` names something the lab itself did or
decided (``simulator.plugin.attribution``); ``docs/metrics.md`` defines each.
"""

from __future__ import annotations

from simulator.plugin.attribution import STORE_LOGIC

CAUSES = (
    "estimate_underrun",
    "hold_expired_while_running",
    "settlement_lost",
    "server_data_loss",
    "eviction",
    "fail_open_admission",
    "per_replica_ledger",
    "stray_layout_writer",
    "crashed_replica_ledger",
    "scope_not_enforced",
    "misaligned_reply",
    STORE_LOGIC,
)
"""Every cause an overshoot can be attributed to (see docs/metrics.md)."""

CONFIG_CHANGE = "config_change"
"""What the operator's configuration change (``reconfigure``) let in: the
overshoot past the cap in force at the end of admissions each judged by the
cap its own replica ran with. A cap lowered below what was already spent, or
old and new caps serving side by side while it rolls out (or for good, on a
replica it left out), is the operator's doing, not the store's. Only an
overshoot cause: every admission is judged by its own replica's cap, so a
wrongful admission or a false denial is never the change's."""

OVERSHOOT_CAUSES = (*CAUSES[:-1], CONFIG_CHANGE, STORE_LOGIC)
"""The causes ``cap_overshoot_by_<cause>_microdollars`` splits over."""

RECONFIGURED = f"{CONFIG_CHANGE} on reconfigure"
"""What exposed store-logic damage to a request no fault of the lab's hit,
served by a replica the operator had reconfigured: the change itself."""

DRIFT_CAUSES = ("settlement_in_flight", "settlement_lost", "fail_open_admission",
                "duplicate_execution", "server_data_loss", "eviction", "crashed_replica_ledger",
                "scope_not_enforced", STORE_LOGIC)
"""Why the store's recorded spend differs from the true spend (``docs/metrics.md``)."""

UNDERCOUNT_CAUSES = tuple(cause for cause in DRIFT_CAUSES if cause != "duplicate_execution")
OVERCOUNT_CAUSES = ("duplicate_execution", STORE_LOGIC)
"""The causes each one-sided total is split over: a lab cause only ever moves
recorded spend one way (a duplicate up, a loss down); on the other side, what
remains is the store's."""

NAMESPACE_ABSENT_CAUSES = frozenset({"per_replica_ledger", "crashed_replica_ledger",
                                     "stray_layout_writer"})
"""Causes a namespace scope cannot have: only shared stores enforce it, so
none of the per-replica ones; and a v1 replica writes no namespace record, so
what it spends there is ``scope_not_enforced``.

No budget cause excuses an interrupted migration: a sound one parks each claim
and a re-run applies it at most once (seed 000:183-187, 567-570), and the lab's
operator always re-runs it, so what one takes and never puts back is the
store's (``store_logic``, exposed by ``migration_killed on migrate``)."""

SUBJECT_ABSENT_CAUSES = frozenset({"scope_not_enforced"})
"""Every budget store records its subjects: only a namespace scope can be
judged while the fleet runs a layout that does not keep it."""

LEAK_CAUSES = ("replica_crash", "message_lost", "settlement_lost", "server_data_loss",
               STORE_LOGIC)
"""Why a hold outlived its request: its replica died, a message of its reserve
was lost (the gateway gave up on an admission the store made), its
settlement was lost, a restore of older data brought it back, or the store
kept it."""

DENIAL_CAUSES = (*(f"leaked_holds_{cause}" for cause in LEAK_CAUSES if cause != STORE_LOGIC),
                 "duplicate_execution",
                 "store_unavailable", "misaligned_reply", STORE_LOGIC)
"""Why the store denied a request the truth had room for: holds leaked for
one of ``LEAK_CAUSES`` of the lab's, within their deadline (a hold the store
kept, or counted past its deadline, excuses nothing), spend a driver retry
charged twice, the store could not be reached, the reply it acted on was
another call's (a multiplexed connection the lab misaligned), or the store's
own decision."""

SUBJECT_CAUSES = tuple(cause for cause in CAUSES if cause not in SUBJECT_ABSENT_CAUSES)
SUBJECT_DRIFT_CAUSES = tuple(cause for cause in DRIFT_CAUSES if cause not in SUBJECT_ABSENT_CAUSES)
"""The causes a subject scope's summary reports (the analysis reads those)."""
