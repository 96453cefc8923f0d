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
from dataclasses import dataclass

from simulator.scenario import Workload

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
