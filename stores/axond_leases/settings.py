"""Settings of the Redis concurrency-lease limiter.

``INVOKE_CONCURRENCY`` stands for axond's ``redis_support::INVOKE_CONCURRENCY``,
the cap on invokes in flight on one shared connection, which lies outside the
ported excerpt: 64 is our choice (a multiplexed connection pipelines far more,
but the cap exists to refuse rather than pile up work behind a stalled one).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from stores.axond_leases.contract import UnavailablePolicy
from stores.domains import Integer
from stores.quantities import DurationMs

INVOKE_CONCURRENCY = 64
RELEASE_RETRY_CONCURRENCY = 16
MAX_CONCURRENCY = 1_000_000
"""The largest of the limits below: leases in flight, invokes, release retries."""


class LeaseSettings(BaseModel):
    """What one replica's limiter is configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    reloadable: ClassVar[tuple[str, ...]] = ("max_in_flight", "lease_ttl")
    """What an operator may change while the fleet runs (``reconfigure``): the
    cap on leases in flight and the lease TTL, read by each replica at boot."""

    key_prefix: str = Field("axond:rate_limit", description="Prefix of every key the store writes.")
    max_in_flight: Integer = Field(
        10, ge=1, le=MAX_CONCURRENCY,
        description="Leases one (namespace, subject) may hold at once, fleet-wide."
    )
    # gt=0: a lease that expires as it is written limits nothing.
    lease_ttl_ms: DurationMs = Field(
        "30s", gt=0, alias="lease_ttl",
        description="How long a lease outlives a request that never releases it, e.g. '30s'.",
    )
    timeout_ms: DurationMs = Field(
        "250ms", gt=0, alias="timeout",
        description="The caller's latency budget for one acquire; the invoke itself may run "
                    "4 times longer before its connection is retired.",
    )
    connect_timeout_ms: DurationMs = Field(
        "250ms", gt=0, alias="connect_timeout",
        description="Bound on opening a connection (at boot, for a replacement), PING "
                    "included. A release retry's fresh connection is bounded by the release "
                    "budget instead, as in the seed.",
    )
    on_unavailable: UnavailablePolicy = Field(
        UnavailablePolicy.DENY,
        description="'deny' (fail-closed) or 'allow' (fail-open) when the store cannot answer.",
    )
    shared_invoke_concurrency: Integer = Field(
        INVOKE_CONCURRENCY, ge=1, le=MAX_CONCURRENCY,
        description="Invokes in flight on the shared connection at once; past it acquires "
                    "are refused as unavailable, never queued.",
    )
    release_retry_concurrency: Integer = Field(
        RELEASE_RETRY_CONCURRENCY, ge=1, le=MAX_CONCURRENCY,
        description="Release retries on fresh connections at once, per process; past it an "
                    "attempt is skipped, never queued.",
    )
