"""The requests a run's replicas serve, drawn from the scenario's workload.

Each replica draws its arrivals and its requests from its own stream, so the
traffic one replica sees does not change when another replica is added (under
a fleet-wide rate, its share of the rate does). What a workload may say is
``simulator.scenario.workload``; this is how it turns into requests.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simulator.scenario.arrivals import NO_PINS, Pins
from simulator.scenario.sessions import SessionPlan, plan_session

if TYPE_CHECKING:
    from simulator.scenario.workload import Keys, Workload

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
    patience_us: int | None = None
    """With ``workload.patience``: how long its client waits to be admitted
    before it disconnects (its handler cancelled)."""


class KeySpace:
    """Subjects dealt round-robin over namespaces, picked uniformly or by Zipf."""

    def __init__(self, namespaces: int, subjects: int, zipf_exponent: float,
                 namespace_ids: Sequence[str] | None = None) -> None:
        width = len(str(subjects - 1))
        ids = list(namespace_ids or [f"ns-{index}" for index in range(namespaces)])
        self.keys = [
            (ids[index % namespaces], f"subject-{index:0{width}d}") for index in range(subjects)
        ]
        self.namespaces = ids[:min(namespaces, subjects)]
        self._namespace_of = {subject: namespace for namespace, subject in self.keys}
        weights = [1.0 / (rank + 1) ** zipf_exponent for rank in range(subjects)]
        self._cumulative = list(itertools.accumulate(weights))
        self.followed = list(self.keys)
        """Every key a request may have: those drawn from, then any a fixed
        list of arrivals pins outside them (``follow_pinned``). The lab
        follows these on the server; draws use ``keys`` alone."""

    @property
    def followed_namespaces(self) -> list[str]:
        """The namespaces of ``followed``: those drawn from, then pinned ones."""
        return list(dict.fromkeys([*self.namespaces, *(key[0] for key in self.followed)]))

    def follow_pinned(self, arrivals: Any) -> None:
        """Add the keys ``arrivals`` pins (a fixed list's namespace and subject
        columns) to ``followed``: a request's namespace is its pinned one, else
        its subject's; a pinned namespace with drawn subjects may meet any."""
        namespaces = getattr(arrivals, "namespace", None)
        subjects = getattr(arrivals, "subject", None)
        if namespaces is None and subjects is None:
            return
        known = set(self.followed)
        for index in range(len(arrivals.at_us)):
            if subjects is not None:
                subject = subjects[index]
                namespace = (namespaces[index] if namespaces is not None
                             else self.namespace_of(subject))
                pinned = [(namespace, subject)]
            else:
                pinned = [(namespaces[index], subject) for _, subject in self.keys]
            for key in pinned:
                if key not in known:
                    known.add(key)
                    self.followed.append(key)

    @classmethod
    def of(cls, keys: Keys) -> KeySpace:
        """The key space a workload's ``keys`` describe."""
        return cls(keys.namespaces, keys.subjects, keys.zipf_exponent, keys.namespace_ids)

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
        # Likewise no draw without patience.
        patience = workload.patience
        patience_us = max(0, patience.sample(rng)) if patience is not None else None
        return Request(number=number, kind=kind, session=session, patience_us=patience_us,
                       **fields)

    def _stream(self) -> tuple[str, float]:
        """The request's kind, and the fraction of it that runs."""
        streaming = self.workload.streaming
        # No draws when nothing streams, so such scenarios keep their traces.
        if not streaming.share or self.rng.random() >= streaming.share:
            return "unary", 1.0
        if not streaming.cut_short or self.rng.random() >= streaming.cut_short:
            return "stream", 1.0
        return "stream_cut", self.rng.random()
