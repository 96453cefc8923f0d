"""What the ledger family's oracle keeps: each lease, account and usage event,
the truth as holders lived it beside the ledger's record of it.

The truth comes from the holders' side (``lifecycle``): units a spend was
charged to a lease, the grants a holder received, the holders that died.
The record comes from the ledger itself (``observer``): every grant, every
settlement, the usage billed to every lease and every account's funding
statement, read after each transaction that touched them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stores.tollgate.domain import Conservation, LeaseGrant

Source = tuple[int, int]
"""A holder: (replica index, incarnation)."""


@dataclass
class LeaseBook:
    """One lease the ledger granted."""

    grant: LeaseGrant
    granted_at_us: int
    tag: int
    """The request whose transaction granted it (``-1`` for none)."""
    via: str
    """``acquire`` or ``consolidate``: the transaction that granted it."""
    stale_exchange: bool = False
    """Granted by a consolidation of a lease no longer active, or presenting
    another's token: a sound ledger refuses it (no grant to strand)."""
    holder: Source | None = None
    """The holder that received the grant; ``None`` while none has."""
    holder_lost: bool = False
    """Its holder died while the lease was active."""
    consumed: int = 0
    """Truth: units spends were charged to it."""
    arrived: int = 0
    """Units of its distinct usage events that reached the ledger."""
    returned_in_time: int = 0
    """Truth: units its holder gave back by a release or consolidation that
    reached the ledger before the lease's expiry plus the configured grace."""
    touched_by: set[int] = field(default_factory=set)
    """The requests (tags; ``-1`` for a holder's background loop) whose
    transactions released, consolidated or billed it, or whose spends were
    charged to it: whose faults may have exposed what the ledger did to it."""
    refused_return: int = 0
    """Units a release or consolidation refused as not active within the
    grace offered back while the ledger still held the lease active: forfeited
    if the sweep reclaims it next."""
    # The ledger's record, from the lease's view after each transaction.
    state: str = "active"
    billed: int = 0
    loss: int = 0
    settled_at_us: int | None = None
    settled_by: str = ""
    """The transaction that settled it, in words."""
    unbilled_arrived_at_us: int | None = None
    """When an ingest first left usage it received for it unbilled (the store's)."""
    unbilled_arrived_words: str = ""
    """That ingest, in words."""
    credited: int = 0
    """Units the ledger credited back when it settled the lease."""

    @property
    def unbilled(self) -> int:
        return max(0, self.consumed - self.billed)

    @property
    def overbilled(self) -> int:
        return max(0, self.billed - self.consumed)


@dataclass
class AccountBook:
    """One account: the truth of what its spends consumed, and its statement."""

    account: int
    where: tuple[str, str]
    """The workload's key it stands for (namespace, subject)."""
    consumed: int = 0
    statement: Conservation | None = None
    residual_worst: int = 0
    """The residual furthest from zero after any transaction."""
    periods: set[int] = field(default_factory=set)
    """The budget periods (their first instants) a rollover put in force."""
    expired_units: int = 0
    """The unspent allowance rollovers expired."""


@dataclass
class UsageBook:
    """One usage event: its lease, units, and whether it reached the ledger."""

    lease_id: int
    units: int
    arrivals: int = 0
    source: Source | None = None
    """The holder that charged it."""
    order: int = 0
    """Its place among the events its holder charged (a holder sends them in
    that order, re-sending a batch unchanged until the ledger answers)."""
    arrived_at_us: int | None = None
    """When the first ingest carrying it committed."""
    consumed_at_us: int = 0
    """When its spend was charged."""


@dataclass
class Counts:
    """Running counts the summary and the samples read."""

    values: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, by: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + by

    def get(self, name: str) -> int:
        return self.values.get(name, 0)
