"""Sessions: requests that are many calls, each over several keys and amounts.

Some stores guard a *session's* budgets rather than one request's: an agent
session lasts hours, makes tool calls, and each call spends on several
counters at once (tokens, calls, a per-tool count), gives back what it did
not use, and the session's counters are cleared when it closes. A scenario
with ``[workload.sessions]`` turns every arrival into such a session: the
request carries a ``SessionPlan`` drawn when it arrives, and its family's
lifecycle plays the plan out.

Rules kept here:

* A plan is drawn whole, from the replica's workload stream, when its
  request is drawn: the same scenario and seed give the same sessions, and
  a scenario without sessions draws nothing more (its traces do not move).
* A plan is data (frozen values): what the session will *try* to do. What
  happens to it (refusals, lost replies, retries, a crash) is the run's.
* Keys are the session's prefix plus a counter name; the prefix carries a
  hash tag (``{...}``) so every key of a session shares one cluster slot, as
  the stores that keep sessions require.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from simulator.scenario.base import Model
from simulator.scenario.distributions import CounterDistribution, DurationDistribution
from stores.domains import REDIS_INTEGER_MAX, Integer, Probability

MAX_CALLS_PER_SESSION = 100_000
"""More calls than this in one session is a scenario mistake, not a workload."""

MAX_RETRIES = 1_000
"""The most re-sends of one call: more is a loop, not a retry policy."""

WHOLE = 2**64 - 1
"""The amount a whole refund sends: "all of it", the seed's ``u64::MAX``. The
store clamps it to ``i64::MAX`` and the counter at zero: everything goes back."""


class Counter(Model):
    """One counter every call of a session spends on."""

    amount: CounterDistribution = Field(1, description="What one call spends on it.")
    limit: Integer = Field(ge=0, le=REDIS_INTEGER_MAX,
                           description="The session's budget on this counter.")


class Refunds(Model):
    """Unused amounts given back after a call's work."""

    chance: Probability = Field(
        0.0, description="Share of committed calls that give something back.")
    share: Probability = Field(
        0.5, description="The share of each refunded counter's spend given back.")
    counters: list[str] = Field(default_factory=list,
                                description="The counters a refund gives back on "
                                "(default: every counter).")
    whole: Probability = Field(
        0.0, description="Share of refunded counters given back whole: the call sends the "
        "'all' amount (u64 max), which the store clamps to i64 max and the counter at zero. "
        "Drawn per counter, so one refund may mix whole and partial amounts.")


class Sessions(Model):
    """Every arrival is a session of tool calls (see ``simulator.scenario.sessions``)."""

    lifetime: DurationDistribution = Field("2h", description="How long a session stays open.")
    call_every: DurationDistribution = Field(
        "exponential(2m)", description="The gap before each tool call of a session.")
    call_duration: DurationDistribution = Field(
        "lognormal(2s, 0.5)", description="How long a call works between its spend and "
        "its refund.")
    counters: dict[str, Counter] = Field(
        default_factory=lambda: {"tokens": Counter(amount="uniform(100, 4000)", limit=200_000),
                                 "total_calls": Counter(amount=1, limit=100)},
        description="The counters each call spends on, by name: {amount, limit}.")
    refunds: Refunds = Field(Refunds(), description="What calls give back.")
    tally: str | None = Field(
        None, description="A counter kept with `add`, not spent on: each committed call adds "
        "1 to the session's prefix plus this name (bookkeeping, such as a count of tool "
        "calls), checked only against the store's own bound and cleared with the session. "
        "Unset: no call adds.")
    retries: Integer = Field(1, ge=0, le=MAX_RETRIES, description="Re-sends of a refused or "
                             "failed call, with the same intent.")
    retry_after: DurationDistribution = Field("1s", description="The wait before a re-send.")
    cleanup_after: DurationDistribution = Field(
        "0s", description="When the session's counters are cleared, after its end "
        "(0s: at its end, racing a call still running).")
    prefix_from: Literal["session", "subject"] = Field(
        "session", description="'session': each session has keys of its own; 'subject': "
        "sessions of one subject reuse its prefix, as a recycled session id does.")

    @field_validator("counters")
    @classmethod
    def _some_counters(cls, counters: dict[str, Counter]) -> dict[str, Counter]:
        if not counters:
            raise ValueError("a session needs at least one counter")
        return counters

    @field_validator("tally")
    @classmethod
    def _tally_apart(cls, tally: str | None, info) -> str | None:
        if tally is not None and (not tally or tally in (info.data.get("counters") or {})):
            raise ValueError(f"tally {tally!r} must be a name of its own, not one of the "
                             "counters calls spend on")
        return tally

    @field_validator("refunds")
    @classmethod
    def _known_counters(cls, refunds: Refunds, info) -> Refunds:
        if "counters" not in info.data:
            return refunds  # the counters were refused already: say that only
        counters = info.data["counters"]
        unknown = sorted(set(refunds.counters) - set(counters))
        if unknown:
            raise ValueError(f"refunds.counters names {unknown}, which are not among the "
                             f"session's counters {sorted(counters)}")
        return refunds

    @model_validator(mode="after")
    def _a_bounded_number_of_calls(self) -> Sessions:
        # Refused here, naming the fields, rather than when a session is drawn
        # mid-run: judged on the means, what a typical session would make.
        gap = self.call_every.mean
        if gap <= 0:
            raise ValueError("call_every must be longer than 0 (it is the gap between calls)")
        typical = self.lifetime.mean / gap
        if typical > MAX_CALLS_PER_SESSION:
            raise ValueError(f"a typical session would make {typical:,.0f} calls (lifetime / "
                             f"call_every), past {MAX_CALLS_PER_SESSION:,}; lengthen "
                             "call_every or shorten lifetime")
        return self


@dataclass(frozen=True, slots=True)
class Part:
    """One key of a call: ``counter`` (the key is the session's prefix plus it),
    an ``amount`` and the ``limit`` the store checks it against."""

    counter: str
    amount: int
    limit: int


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One tool call of a session."""

    offset_us: int
    """When it starts, from the session's start."""
    spends: tuple[Part, ...]
    work_us: int
    """How long it works between its spend and its refund."""
    refunds: tuple[Part, ...] = ()
    """What it gives back after its work (their ``limit`` is unused; an
    ``amount`` of ``WHOLE`` gives back everything)."""
    tally: Part | None = None
    """What it ``add``s once its spend committed (its ``limit`` is unused: the
    store's ``add`` checks its own bound)."""

    @property
    def counters(self) -> tuple[str, ...]:
        """Every counter it writes: those it spends on, then its tally's."""
        names = tuple(part.counter for part in self.spends)
        return names if self.tally is None else (*names, self.tally.counter)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """What one session will try to do."""

    prefix: str
    lifetime_us: int
    calls: tuple[PlannedCall, ...]
    retries: int
    retry_after_us: int
    cleanup_at_us: int
    """When its counters are cleared, from its start (at or after its end)."""

    def key(self, counter: str) -> str:
        return self.prefix + counter


def session_prefix(settings: Sessions, number: int, subject: str) -> str:
    """The hash-tagged prefix of a session's keys."""
    owner = subject if settings.prefix_from == "subject" else f"s{number}"
    return f"budget:{{{owner}}}:"


def plan_session(settings: Sessions, number: int, subject: str,
                 rng: random.Random) -> SessionPlan:
    """Draw one session's plan from ``rng`` (the replica's workload stream)."""
    lifetime = max(0, settings.lifetime.sample(rng))
    refunded = settings.refunds.counters or list(settings.counters)
    tally = None if settings.tally is None else Part(settings.tally, 1, 0)
    calls = []
    offset = max(0, settings.call_every.sample(rng))
    while offset < lifetime:
        if len(calls) >= MAX_CALLS_PER_SESSION:
            raise ValueError(f"workload.sessions: more than {MAX_CALLS_PER_SESSION:,} calls in "
                             "one session; lengthen call_every or shorten lifetime")
        spends = tuple(Part(name, max(0, counter.amount.sample(rng)), counter.limit)
                       for name, counter in settings.counters.items())
        refunds: tuple[Part, ...] = ()
        if rng.random() < settings.refunds.chance:
            # In integers (parts per million of the share): amounts may be
            # far past what a float holds exactly.
            share_ppm = round(settings.refunds.share * 1_000_000)
            refunds = tuple(Part(part.counter,
                                 WHOLE if _whole(settings.refunds, rng)
                                 else part.amount * share_ppm // 1_000_000, part.limit)
                            for part in spends if part.counter in refunded)
        calls.append(PlannedCall(offset, spends, max(0, settings.call_duration.sample(rng)),
                                 refunds, tally))
        offset += max(1, settings.call_every.sample(rng))
    return SessionPlan(
        prefix=session_prefix(settings, number, subject),
        lifetime_us=lifetime,
        calls=tuple(calls),
        retries=settings.retries,
        retry_after_us=max(0, settings.retry_after.sample(rng)),
        cleanup_at_us=lifetime + max(0, settings.cleanup_after.sample(rng)),
    )


def _whole(refunds: Refunds, rng: random.Random) -> bool:
    """Whether one refunded counter goes back whole; no draw unless some do,
    so a scenario without whole refunds draws the sessions it always drew."""
    return refunds.whole > 0 and rng.random() < refunds.whole
