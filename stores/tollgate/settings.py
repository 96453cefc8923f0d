"""Settings of a tollgate holder fleet and the ledger it leases from.

The ledger's part is its ``GrantPolicy`` (``policy()``) and what each account
is funded with when the lab opens it; the rest is the holder's (a gateway
instance funding its local spends from one lease per account): how much it
asks for, when it stops spending a lease, how often it bills its usage,
releases what it no longer spends and sweeps expired leases.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from stores.domains import Integer
from stores.quantities import DurationMs
from stores.tollgate.domain import LEDGER_UNITS_MAX, GrantPolicy

MAX_RELEASE_ATTEMPTS = 1_000
"""The most tries a holder gives one release."""


class TollgateSettings(BaseModel):
    """What the ledger and every holder are configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

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

    def policy(self) -> GrantPolicy:
        """The ledger's grant policy."""
        return GrantPolicy(shrink_divisor=self.shrink_divisor, min_grant=self.min_grant,
                           max_ttl_ms=self.max_ttl_ms, reclaim_grace_ms=self.reclaim_grace_ms)
