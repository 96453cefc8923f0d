"""The traffic: which requests arrive where and when, and what they cost.

Each replica draws its arrivals and its requests from its own stream, so the
traffic one replica sees does not change when another replica is added. The
fleet-wide arrival rate is split evenly over the replicas (the superposition
of independent Poisson processes is Poisson at the summed rate).
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, field_validator

from simulator.distributions import AmountDistribution, DurationDistribution
from simulator.models import Model
from stores.quantities import parse_rate_per_second

_ZIPF = re.compile(r"^\s*zipf\(\s*([0-9.]+)\s*\)\s*$")


class Keys(Model):
    """The budget keys requests are charged to."""

    namespaces: int = Field(1, ge=1, description="Namespaces; subjects are dealt round-robin.")
    subjects: int = Field(100, ge=1, description="Subjects in all (each in one namespace).")
    skew: str = Field(
        "uniform", description="How requests pick a subject: 'uniform' or 'zipf(S)' (hot keys)."
    )

    @field_validator("skew")
    @classmethod
    def _skew(cls, value: str) -> str:
        if value.strip() != "uniform" and not _ZIPF.match(value):
            raise ValueError(f"expected 'uniform' or 'zipf(S)' such as 'zipf(1.1)', got {value!r}")
        return value.strip()

    @property
    def zipf_exponent(self) -> float:
        match = _ZIPF.match(self.skew)
        return float(match.group(1)) if match else 0.0


_POISSON = re.compile(r"^\s*poisson\(\s*(?P<rate>[^)]+)\)\s*$")


def _arrivals(value: Any) -> Any:
    if isinstance(value, str):
        match = _POISSON.match(value)
        if not match:
            raise ValueError(f"expected 'poisson(RATE)' such as 'poisson(500/s)', got {value!r}")
        return {"kind": "poisson", "rate_per_second": parse_rate_per_second(match["rate"])}
    return value


class Arrivals(Model):
    """An arrival process; written as text, e.g. ``"poisson(500/s)"``."""

    written_as_text: ClassVar[bool] = True
    kind: Literal["poisson"] = "poisson"
    rate_per_second: float = Field(gt=0, allow_inf_nan=False)

    def __str__(self) -> str:
        return f"poisson({self.rate_per_second:g}/s)"


class Workload(Model):
    """The traffic: when requests arrive, what they cost, how long they run."""

    arrivals: Annotated[Arrivals, BeforeValidator(_arrivals)] = Field(
        "poisson(100/s)",
        description="Fleet-wide arrival process, e.g. 'poisson(500/s)', split evenly "
        "over the replicas.",
    )
    keys: Keys = Field(Keys(), description="The key space and its skew.")
    estimate_microdollars: AmountDistribution = Field(
        5_000, description="What the gateway reserves before a request runs."
    )
    actual_microdollars: AmountDistribution = Field(
        "uniform(0, 5000)", description="What the request really spends (may exceed the estimate)."
    )
    duration: DurationDistribution = Field(
        "lognormal(40ms, 0.5)", description="How long the upstream work takes."
    )


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


class KeySpace:
    """Subjects dealt round-robin over namespaces, picked uniformly or by Zipf."""

    def __init__(self, namespaces: int, subjects: int, zipf_exponent: float) -> None:
        width = len(str(subjects - 1))
        self.keys = [
            (f"ns-{index % namespaces}", f"subject-{index:0{width}d}") for index in range(subjects)
        ]
        weights = [1.0 / (rank + 1) ** zipf_exponent for rank in range(subjects)]
        self._cumulative = list(itertools.accumulate(weights))

    def pick(self, rng: random.Random) -> tuple[str, str]:
        point = rng.random() * self._cumulative[-1]
        index = bisect.bisect_right(self._cumulative, point)
        return self.keys[min(index, len(self.keys) - 1)]


class RequestSource:
    """One replica's stream of requests."""

    def __init__(self, workload: Workload, key_space: KeySpace, replicas: int, replica: int,
                 rng: random.Random) -> None:
        self.workload = workload
        self.key_space = key_space
        self.rate_per_us = workload.arrivals.rate_per_second / replicas / 1e6
        self.rng = rng
        self._numbers = itertools.count(replica * REQUESTS_PER_REPLICA)

    def next_gap_us(self) -> int:
        return max(1, round(self.rng.expovariate(self.rate_per_us)))

    def next_request(self) -> Request:
        rng = self.rng
        namespace, subject = self.key_space.pick(rng)
        workload = self.workload
        return Request(
            number=next(self._numbers),
            namespace=namespace,
            subject=subject,
            estimate_microdollars=max(0, workload.estimate_microdollars.sample(rng)),
            actual_microdollars=max(0, workload.actual_microdollars.sample(rng)),
            duration_us=max(0, workload.duration.sample(rng)),
        )
