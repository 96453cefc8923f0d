"""Settings of a tollgate holder fleet and the ledger it leases from.

The ledger's part is its ``GrantPolicy`` (``policy()``) and what each account
is funded with when the lab opens it; the rest is the holder's (a gateway
instance funding its local spends from one lease per account): how much it
asks for, when it stops spending a lease, how often it bills its usage,
releases what it no longer spends, sweeps expired leases and, when the
accounts have a budget schedule, runs the ledger's rollover pass.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from stores.domains import Integer
from stores.quantities import DurationMs
from stores.tollgate.domain import LEDGER_UNITS_MAX, BudgetSchedule, GrantPolicy

MAX_RELEASE_ATTEMPTS = 1_000
"""The most tries a holder gives one release."""


class TollgateSettings(BaseModel):
    """What the ledger and every holder are configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    reloadable: ClassVar[tuple[str, ...]] = ("lease_units", "lease_ttl")
    """What an operator may change while the fleet runs (``reconfigure``): what a
    holder asks its leases for, read by each replica at boot. The ledger's own
    settings (its grace, its TTL clamp, the budget schedule) are the service's,
    which a replica's restart does not reload."""

    deposit: Integer = Field(
        5_000_000, ge=1, le=LEDGER_UNITS_MAX,
        description="Units each account is funded with when the run starts (one account "
                    "per key of the workload).")
    lease_units: Integer = Field(
        200_000, ge=1, le=LEDGER_UNITS_MAX,
        description="Units a holder asks for per lease (more when one spend needs more); "
                    "the ledger may grant less near exhaustion.")
    lease_ttl_ms: DurationMs = Field(
        "30s", gt=0, alias="lease_ttl", description="The TTL a holder asks for its leases.")
    spend_margin_ms: DurationMs = Field(
        "2s", ge=0, alias="spend_margin",
        description="A holder stops spending a lease this long before it expires, so its "
                    "last usage is billed before the reclaim.")
    flush_every_ms: DurationMs = Field(
        "500ms", gt=0, alias="flush_every",
        description="How often a holder bills its pending usage and releases the leases it "
                    "stopped spending.")
    ingest_batch: Integer = Field(100, ge=1, le=10_000,
                              description="Usage events per ingest call, at most.")
    release_attempts: Integer = Field(
        5, ge=1, le=MAX_RELEASE_ATTEMPTS,
        description="Tries a holder gives a release that failed in transit before it leaves "
                    "the lease to the reclaim sweep.")
    reclaim_every_ms: DurationMs = Field(
        "10s", gt=0, alias="reclaim_every",
        description="How often each holder runs the ledger's expiry sweep.")
    reclaim_batch: Integer = Field(100, ge=1, le=10_000,
                               description="Leases one reclaim transaction settles, at most.")
    allocation_wait_ms: DurationMs = Field(
        "250ms", ge=0, alias="allocation_wait",
        description="How long a spend waits for its holder's allocation already in flight "
                    "for the same account before it is refused as busy.")
    shrink_divisor: Integer = Field(
        2, ge=1, le=LEDGER_UNITS_MAX,
        description="Near exhaustion a grant is capped at balance // shrink_divisor.")
    min_grant: Integer = Field(1, ge=1, le=LEDGER_UNITS_MAX,
                           description="The smallest grant the shrink cap allows.")
    max_ttl_ms: DurationMs = Field("5m", gt=0, alias="max_ttl",
                                   description="The ledger clamps every lease's TTL to this.")
    reclaim_grace_ms: DurationMs = Field(
        "30s", ge=0, alias="reclaim_grace",
        description="How long past its expiry a lease may still be released before the "
                    "sweep reclaims it.")

    budget_allowance: Integer | None = Field(
        None, ge=0, le=LEDGER_UNITS_MAX,
        description="Each account's periodic allowance (seed 003 L1113-L1162): a budget "
                    "schedule of this many units per budget_period, deposited by the "
                    "rollover pass at each period boundary, its unspent part expiring at the "
                    "next; deposit stays a top-up that never expires. Unset: no schedule, no "
                    "rollover pass.")
    budget_period_ms: DurationMs = Field(
        "10s", gt=0, alias="budget_period",
        description="The length of a budget period (with budget_allowance); periods are "
                    "calendar ones, from the epoch, so one dividing a day starts with the run.")
    rollover_every_ms: DurationMs = Field(
        "1s", gt=0, alias="rollover_every",
        description="How often each holder runs the ledger's rollover pass (with "
                    "budget_allowance), as every control-plane replica does (seed 003 "
                    "L1142-L1147): the first after this long, which deposits the first "
                    "allowance.")
    rollover_batch: Integer = Field(
        100, ge=1, le=10_000,
        description="Accounts one rollover transaction crosses, at most.")

    def schedule(self) -> BudgetSchedule | None:
        """Each account's budget schedule, if the run gives one."""
        if self.budget_allowance is None:
            return None
        return BudgetSchedule(self.budget_allowance, self.budget_period_ms)

    def policy(self) -> GrantPolicy:
        """The ledger's grant policy."""
        return GrantPolicy(shrink_divisor=self.shrink_divisor, min_grant=self.min_grant,
                           max_ttl_ms=self.max_ttl_ms, reclaim_grace_ms=self.reclaim_grace_ms)
