"""Releasing a lease in the background, with retries, within a budget.

Nobody waits on a release (the permit was dropped), so it may take longer
than an acquire, but not forever: each attempt has the release budget
(``timing.release_timeout_ms``) and all of them the retry window, never past
the lease TTL, after which the lease has expired anyway. A release that
gives up leaves the lease to its deadline.

* The first attempt goes over the shared connection: the generation the
  lease was acquired on while it is current and trusted, else the current
  one if trusted, else none (no attempt on a suspect connection). It takes a
  shared invoke slot, never waits for one (all taken: skipped), and an
  attempt that outlives its budget retires the generation, as an acquire
  does. A reply counts only if the generation is still trusted afterwards:
  on a misaligned connection it may be another command's.
* Later attempts back off (25 ms doubling, at most 200 ms) and each opens a
  fresh connection of its own (``Connector.connect``), used once and closed.
  They take a slot of the process-wide release retry cap; when none is free
  the attempt is skipped, not queued, so a burst of failing releases cannot
  open a connection each.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from stores.axond_leases.generations import (
    UNREACHABLE,
    ConnectionRecovery,
    SharedConnection,
    close_quietly,
    describe,
)
from stores.axond_leases.slots import Slots
from stores.axond_leases.timing import (
    RELEASE_MAX_ATTEMPTS,
    release_backoff_ms,
    release_retry_window_ms,
    release_timeout_ms,
)

logger = logging.getLogger("stores.axond_leases")


class Attempt(enum.Enum):
    RELEASED = "released"
    FAILED = "failed"
    OUT_OF_TIME = "out_of_time"


def is_release_reply(raw: Any) -> bool:
    """The release script's reply is an integer; anything else was meant
    for another command (redis-rs's typed read fails on it)."""
    if isinstance(raw, bool):
        return False
    try:
        int(raw)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class LeaseRelease:
    """Everything needed to release one lease later: axond's ``RedisRelease``."""

    recovery: ConnectionRecovery
    connection: SharedConnection
    """The generation that was current when the lease was asked for."""
    retry_slots: Slots
    timeout_ms: int
    lease_ttl_ms: int
    lease_key: str
    lease_id: str
    max_attempts: int = RELEASE_MAX_ATTEMPTS
    """Attempts in all, the shared one included (``LeaseLimiter.release_attempts``)."""

    def spawn(self) -> None:
        """Release in the background (what dropping the permit does)."""
        self.recovery.runtime.spawn(self.run())

    async def run(self) -> bool:
        """Every attempt the budget allows; whether one released the lease."""
        runtime = self.recovery.runtime
        budget_ms = release_timeout_ms(self.timeout_ms)
        deadline_ms = runtime.now_ms() + release_retry_window_ms(self.timeout_ms,
                                                                 self.lease_ttl_ms)
        shared = self._shared_connection()
        if shared is not None and await self._on_shared(shared, budget_ms, deadline_ms):
            return True
        for attempt in range(2, self.max_attempts + 1):
            remaining_ms = deadline_ms - runtime.now_ms()
            if remaining_ms <= 0:
                break
            await runtime.sleep_ms(min(release_backoff_ms(self.timeout_ms, attempt),
                                       remaining_ms))
            if deadline_ms - runtime.now_ms() <= 0:
                break
            slot = self.retry_slots.try_take()
            if slot is None:
                logger.debug("lease release retry %d skipped: the retry cap is taken", attempt)
                continue
            try:
                outcome = await self._on_fresh_connection(budget_ms, deadline_ms, attempt)
            finally:
                slot.release()
            if outcome is Attempt.RELEASED:
                return True
            if outcome is Attempt.OUT_OF_TIME:
                break
        logger.warning("lease %s release gave up; it will expire at its deadline",
                       self.lease_id)
        return False

    def _shared_connection(self) -> SharedConnection | None:
        recovery = self.recovery
        current, suspect = recovery.current, recovery.suspect_generation
        mine = self.connection
        if current.generation == mine.generation and suspect < mine.generation:
            return mine
        if suspect < current.generation:
            return current
        return None

    async def _on_shared(self, shared: SharedConnection, budget_ms: int,
                         deadline_ms: int) -> bool:
        recovery = self.recovery
        remaining_ms = deadline_ms - recovery.runtime.now_ms()
        if remaining_ms <= 0:
            return False
        slot = recovery.invoke_slots.try_take()
        if slot is None:
            logger.debug("shared lease release skipped: the shared invoke cap is taken")
            return False
        replied = False
        try:
            with recovery.invoke(shared, "release") as invoke:
                try:
                    raw = await recovery.runtime.timeout_ms(
                        min(budget_ms, remaining_ms),
                        shared.release(keys=[self.lease_key], args=[self.lease_id]))
                except TimeoutError:
                    pass  # past its budget: the invoke guard retires the generation
                except UNREACHABLE as error:
                    invoke.complete()
                    logger.debug("shared lease release failed: %s", describe(error))
                else:
                    invoke.complete()
                    replied = is_release_reply(raw)
        finally:
            slot.release()
        if replied and not recovery.is_untrusted(shared.generation):
            return True
        logger.debug("lease release on the shared connection failed; retrying on a fresh one")
        return False

    async def _on_fresh_connection(self, budget_ms: int, deadline_ms: int,
                                   attempt: int) -> Attempt:
        recovery, runtime = self.recovery, self.recovery.runtime
        remaining_ms = deadline_ms - runtime.now_ms()
        try:
            connection = await runtime.timeout_ms(min(budget_ms, remaining_ms),
                                                  recovery.connector.connect())
        except UNREACHABLE as error:
            logger.debug("fresh connection for lease release attempt %d failed: %s",
                         attempt, describe(error))
            return Attempt.FAILED
        try:
            remaining_ms = deadline_ms - runtime.now_ms()
            if remaining_ms <= 0:
                return Attempt.OUT_OF_TIME
            release = connection.register_script(recovery.scripts.source("release"))
            raw = await runtime.timeout_ms(min(budget_ms, remaining_ms),
                                           release(keys=[self.lease_key], args=[self.lease_id]))
        except UNREACHABLE as error:
            logger.debug("lease release attempt %d failed: %s", attempt, describe(error))
            return Attempt.FAILED
        finally:
            await close_quietly(connection)
        return Attempt.RELEASED if is_release_reply(raw) else Attempt.FAILED
