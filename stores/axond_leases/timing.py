"""The deadlines axond derives from the caller's ``timeout``, in milliseconds.

* The caller's ``timeout`` is a latency budget: past it the caller is
  answered (unavailable) but the invoke runs on.
* The owned invoke's liveness deadline is longer (``invoke_timeout_ms``):
  only an invoke that outlives it retires its connection's generation, so an
  ordinary slow reply does not cost a healthy shared connection. axond's
  ``redis_support::operation_liveness_timeout`` is outside the ported
  excerpt; we take 4 x ``timeout`` (the multiplier axond's release budget
  uses), with no floor. The seed's own tests bracket it: a reply 2 x
  ``timeout`` late must not retire the generation
  (``caller_timeout_does_not_retire_a_slow_but_usable_invoke``), and a
  stalled invoke must have returned its invoke slot and retired its
  generation within 1 s of a 50 ms timeout
  (``retired_invoke_reclaims_its_shared_permit``): so between 2 x and ~19 x.
* A release has nobody waiting on it: each attempt may take 4 x ``timeout``,
  at least one second, and all attempts together at most the retry window
  (never past the lease TTL, after which the lease is gone anyway).
"""

from __future__ import annotations

REDIS_OPERATION_TIMEOUT_MULTIPLIER = 4
RELEASE_MAX_ATTEMPTS = 8
RELEASE_RETRY_WINDOW_MULTIPLIER = 10
RELEASE_TIMEOUT_FLOOR_MS = 1_000
RELEASE_BACKOFF_BASE_MS = 25
RELEASE_BACKOFF_CAP_MS = 200


def invoke_timeout_ms(timeout_ms: int) -> int:
    """How long an owned acquire invoke may run before its generation is retired."""
    return timeout_ms * REDIS_OPERATION_TIMEOUT_MULTIPLIER


def release_timeout_ms(timeout_ms: int) -> int:
    """The budget of one release attempt (its connect, then its invoke)."""
    return max(timeout_ms * REDIS_OPERATION_TIMEOUT_MULTIPLIER, RELEASE_TIMEOUT_FLOOR_MS)


def release_retry_window_ms(timeout_ms: int, lease_ttl_ms: int) -> int:
    """How long a release keeps trying, all attempts together."""
    budget = release_timeout_ms(timeout_ms)
    return min(budget * RELEASE_RETRY_WINDOW_MULTIPLIER * RELEASE_MAX_ATTEMPTS, lease_ttl_ms)


def release_backoff_ms(timeout_ms: int, attempt: int) -> int:
    """The pause before retry ``attempt`` (2 is the first on a fresh
    connection): 25 ms doubling, at most 200 ms."""
    base = min(release_timeout_ms(timeout_ms), RELEASE_BACKOFF_BASE_MS)
    return min(base * 2 ** (attempt - 2), RELEASE_BACKOFF_CAP_MS)
