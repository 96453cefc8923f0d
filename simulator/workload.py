"""The traffic: which requests arrive where and when, and what they cost.

Each replica draws its arrivals and its requests from its own stream, so the
traffic one replica sees does not change when another replica is added (under
a fleet-wide rate, its share of the rate does).

Arrival processes are in ``simulator.arrivals``. Costs and durations are
distributions (see ``simulator.distributions``) or ``"empirical(PATH.csv)"``
(see ``simulator.empirical``).
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer, field_validator

from simulator.arrivals import (
    ARRIVALS_DOMAIN,
    NO_PINS,
    Arrivals,
    Pins,
    arrivals_as_written,
    parse_arrivals,
)
from simulator.empirical import AmountSampler, DurationSampler
from simulator.models import Model
from simulator.sessions import SessionPlan, Sessions, plan_session
from stores.domains import Domain, Integer, Probability

MAX_SUBJECTS = 1_000_000
"""The most keys a workload names: a million subjects (and namespaces)."""
MAX_ZIPF_EXPONENT = 50.0
"""The steepest skew: past it the first subject takes every request anyway,
and at a million subjects a steeper one overflows a double (1e6 ** 50 is
1e300, just short of the largest)."""

_ZIPF = re.compile(r"^\s*zipf\(\s*(?P<exponent>[^()]*?)\s*\)\s*$")
_SKEW_HINT = (f"'uniform' or 'zipf(S)' such as 'zipf(1.1)', S a number from 0 to "
              f"{MAX_ZIPF_EXPONENT:g} (a steeper skew sends every request to the first "
              "subject, and its weights overflow a double)")


def _zipf_exponent(skew: str) -> float | None:
    """The exponent of ``zipf(S)``; None for anything else."""
    match = _ZIPF.match(skew)
    if match is None:
        return None
    try:
        exponent = float(match["exponent"].replace("_", ""))
    except ValueError:
        return None
    return exponent if 0 <= exponent <= MAX_ZIPF_EXPONENT else None


class Keys(Model):
    """The budget keys requests are charged to."""

    namespaces: Integer = Field(
        1, ge=1, le=MAX_SUBJECTS,
        description="Namespaces; subjects are dealt round-robin (more than subjects: as many "
        "as subjects).")
    subjects: Integer = Field(100, ge=1, le=MAX_SUBJECTS,
                              description="Subjects in all (each in one namespace).")
    skew: Annotated[str, Domain(_SKEW_HINT)] = Field(
        "uniform", description="How requests pick a subject: 'uniform' or 'zipf(S)' (hot keys)."
    )

    @field_validator("skew")
    @classmethod
    def _skew(cls, value: str) -> str:
        if value.strip() != "uniform" and _zipf_exponent(value) is None:
            raise ValueError(f"expected {_SKEW_HINT}, got {value!r}")
        return value.strip()

    @property
    def zipf_exponent(self) -> float:
        return _zipf_exponent(self.skew) or 0.0


# ----------------------------------------------------------------- workload


class Streaming(Model):
    """Streamed responses, some of which the client cuts short."""

    share: Probability = Field(0.0, description="Share of requests that stream.")
    cut_short: Probability = Field(
        0.0,
        description="Share of streams the client disconnects from, at a uniform fraction of "
        "the way through: duration and actual spend are both scaled by that fraction.",
    )


class Workload(Model):
    """The traffic: when requests arrive, what they cost, how long they run."""

    arrivals: Annotated[
        Arrivals, BeforeValidator(parse_arrivals), PlainSerializer(arrivals_as_written),
        ARRIVALS_DOMAIN,
    ] = Field(
        "poisson(100/s)",
        description="Arrival process: 'poisson(500/s)' (fleet-wide, split over the "
        "replicas), 'poisson(5/s) per replica', 'bursts(2000/s, on=2s, off=8s)' (Poisson "
        "in on windows from time 0; also 'per replica'), or a fixed list {at = [times]; "
        "optional parallel lists replica, namespace, subject, estimate, actual, duration}.",
    )
    keys: Keys = Field(Keys(), description="The key space and its skew.")
    estimate_microdollars: AmountSampler = Field(
        5_000, description="What the gateway reserves before a request runs."
    )
    actual_microdollars: AmountSampler = Field(
        "uniform(0, 5000)",
        description="What the request really spends (may exceed the estimate); also "
        "'empirical(FILE.csv)' (column microdollars).",
    )
    duration: DurationSampler = Field(
        "lognormal(40ms, 0.5)",
        description="How long the upstream work takes; also 'empirical(FILE.csv)' (column "
        "duration_ms, duration_us or duration_s).",
    )
    streaming: Streaming = Field(Streaming(), description="Streamed responses.")
    sessions: Sessions | None = Field(
        None, description="Each arrival is a session of tool calls over several counters "
        "(lifetime, call_every, call_duration, counters, refunds, retries, retry_after, "
        "cleanup_after, prefix_from): for stores that keep session budgets.")


# ------------------------------------------------------------------ runtime

REQUESTS_PER_REPLICA = 1_000_000_000
"""Request numbers are ``replica * REQUESTS_PER_REPLICA + n``: unique, stable."""


@dataclass(frozen=True, slots=True)
class Request:
    number: int
    namespace: str
    subject: str
    estimate_microdollars: int
    actual_microdollars: int
    duration_us: int
    kind: str = "unary"  # "unary", "stream" or "stream_cut" (the client left part way)
    session: SessionPlan | None = None
    """With ``workload.sessions``: the session this arrival opens."""


class KeySpace:
    """Subjects dealt round-robin over namespaces, picked uniformly or by Zipf."""

    def __init__(self, namespaces: int, subjects: int, zipf_exponent: float) -> None:
        width = len(str(subjects - 1))
        self.keys = [
            (f"ns-{index % namespaces}", f"subject-{index:0{width}d}") for index in range(subjects)
        ]
        self.namespaces = [f"ns-{index}" for index in range(min(namespaces, subjects))]
        self._namespace_of = {subject: namespace for namespace, subject in self.keys}
        weights = [1.0 / (rank + 1) ** zipf_exponent for rank in range(subjects)]
        self._cumulative = list(itertools.accumulate(weights))

    def pick(self, rng: random.Random) -> tuple[str, str]:
        point = rng.random() * self._cumulative[-1]
        index = bisect.bisect_right(self._cumulative, point)
        return self.keys[min(index, len(self.keys) - 1)]

    def namespace_of(self, subject: str) -> str:
        """The namespace ``subject`` is dealt to; the first for a subject not in the space."""
        return self._namespace_of.get(subject, self.keys[0][0])


class RequestSource:
    """One replica's stream of requests: when each arrives and what it is."""

    def __init__(self, workload: Workload, key_space: KeySpace, replicas: int, replica: int,
                 rng: random.Random, until_us: int | None = None) -> None:
        if until_us is not None:
            workload.arrivals.check_fits(replicas, until_us)
        self.workload = workload
        self.key_space = key_space
        self.rng = rng
        self._timer = workload.arrivals.timer(replicas, replica, rng)
        self._numbers = itertools.count(replica * REQUESTS_PER_REPLICA)

    def next_arrival(self, now_us: int) -> tuple[int, Request] | None:
        """The next request and when it arrives (never before ``now_us``), or
        None when no more will."""
        arrival = self._timer.next(now_us)
        if arrival is None:
            return None
        at_us, pins = arrival
        return at_us, self.next_request(pins)

    def next_request(self, pins: Pins = NO_PINS) -> Request:
        """Draw a request; ``pins`` (from a fixed list) replace drawn fields. A
        stream cut short is scaled after pinning: pins are the full request."""
        rng = self.rng
        workload = self.workload
        namespace, subject = self.key_space.pick(rng)
        fields = {
            "namespace": namespace,
            "subject": subject,
            "estimate_microdollars": max(0, workload.estimate_microdollars.sample(rng)),
            "actual_microdollars": max(0, workload.actual_microdollars.sample(rng)),
            "duration_us": max(0, workload.duration.sample(rng)),
        }
        if "subject" in pins:
            fields["namespace"] = self.key_space.namespace_of(pins["subject"])
        fields.update(pins)
        kind, fraction = self._stream()
        if kind == "stream_cut":
            # The upstream charges only for what it streamed before the disconnect.
            fields["duration_us"] = round(fields["duration_us"] * fraction)
            fields["actual_microdollars"] = round(fields["actual_microdollars"] * fraction)
        number = next(self._numbers)
        sessions = workload.sessions
        # No draws without sessions, so other scenarios keep their traces.
        session = (plan_session(sessions, number, fields["subject"], rng)
                   if sessions is not None else None)
        return Request(number=number, kind=kind, session=session, **fields)

    def _stream(self) -> tuple[str, float]:
        """The request's kind, and the fraction of it that runs."""
        streaming = self.workload.streaming
        # No draws when nothing streams, so such scenarios keep their traces.
        if not streaming.share or self.rng.random() >= streaming.share:
            return "unary", 1.0
        if not streaming.cut_short or self.rng.random() >= streaming.cut_short:
            return "stream", 1.0
        return "stream_cut", self.rng.random()
