"""The ledger family's causes: whom the verdict may blame for each kind of damage.

Every cause but ``store_logic`` names something the lab did (DESIGN "Who is
to blame"): a holder it crashed, a message it lost or timed out so that a
committed grant never reached its holder, a run it ended while a live holder
still held usage it had not billed. What nothing the lab did explains is the
store's own: a sound ledger keeps its equation, bills each event once, never
funds spends past its deposits, refuses a stale holder and honours the grace
it promises, whatever the network does.
"""

from __future__ import annotations

from simulator.plugin.attribution import STORE_LOGIC

BILLING_LOSS_CAUSES = ("holder_crashed", "unbilled_at_end", STORE_LOGIC)
"""Why units consumed under a lease were never billed: its holder died with
the usage unsent; the run ended while its live holder still held the usage
(the ledger never received it); or the store's: the usage reached the ledger
(an ingest carrying it committed) and was not billed, or its live holder gave
it up while its later usage reached the ledger (``contract``)."""

STRANDED_CAUSES = ("ambiguous_acquire", "ambiguous_consolidate", "holder_crashed",
                   STORE_LOGIC)
"""Why a lease's units sat with no holder to spend or release them until the
TTL reclaim: the acquire or the consolidation that granted it ran without its
caller reading the answer (a lost reply, a timeout, a re-sent command...:
``contract.RAN_UNANSWERED``), so its holder never learned of the grant; its
holder died (before or after receiving it). A grant no holder received and
no such fault explains -- or made by a consolidation of a lease no longer
active -- is the store's."""

STORE_ONLY = ("conservation_violations", "conservation_residual_max_units",
              "double_billed_units", "overspend_units", "settlement_loss_excess_units",
              "fencing_violations", "units_forfeited_in_grace", "regrant_shortfall_units",
              "demand_shortfall_units", "allowance_deposited_twice_units", "false_refusals",
              "spends_past_margin", "periods_missed", "reclaims_overdue")
"""Damage only the store can do: the lab's faults may trigger it (a replayed
batch, a late release), but a sound ledger and holder never let it happen
(``contract``: no clause allows it). Their invariants are ``store_only``."""
