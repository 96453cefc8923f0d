"""The traffic: which requests arrive where and when, and what they cost.

Each replica draws its arrivals and its requests from its own stream, so the
traffic one replica sees does not change when another replica is added (under
a fleet-wide rate, its share of the rate does).

Arrival processes are in ``simulator.scenario.arrivals``. Costs and durations are
distributions (see ``simulator.scenario.distributions``) or ``"empirical(PATH.csv)"``
(see ``simulator.scenario.empirical``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, field_validator, model_validator

from simulator.scenario.arrivals import (
    ARRIVALS_DOMAIN,
    Arrivals,
    arrivals_as_written,
    parse_arrivals,
)
from simulator.scenario.base import Model
from simulator.scenario.empirical import AmountSampler, DurationSampler
from simulator.scenario.sessions import Sessions
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


_IDS_HINT = "a list of distinct, non-empty namespace ids"


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
    namespace_ids: Annotated[list[str] | None, Domain(_IDS_HINT)] = Field(
        None, description="The namespaces' ids, in order: a deployment's own tenant ids, any "
        "characters (e.g. 'acme|eu'); as many as `namespaces`, which defaults to their number. "
        "None: 'ns-0', 'ns-1', ...")

    @model_validator(mode="before")
    @classmethod
    def _namespaces_from_ids(cls, data: Any) -> Any:
        # Naming the ids is enough: their number is the namespaces' count.
        if isinstance(data, dict) and isinstance(data.get("namespace_ids"), list) \
                and data["namespace_ids"]:
            data = {"namespaces": len(data["namespace_ids"]), **data}
        return data

    @field_validator("namespace_ids")
    @classmethod
    def _distinct_ids(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or "" in value or len(set(value)) < len(value)):
            raise ValueError(f"expected {_IDS_HINT}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_id_per_namespace(self) -> Keys:
        if self.namespace_ids is not None and len(self.namespace_ids) != self.namespaces:
            raise ValueError(f"namespace_ids names {len(self.namespace_ids)} namespaces but "
                             f"namespaces is {self.namespaces}; expected one id per namespace")
        return self

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
    patience: DurationSampler | None = Field(
        None, description="How long a client waits for its request to be admitted before it "
        "disconnects: the gateway's handler is cancelled while the store decides (read by "
        "lifecycles whose callers can be cancelled mid-admission). None: it waits.")
    sessions: Sessions | None = Field(
        None, description="Each arrival is a session of tool calls over several counters "
        "(lifetime, call_every, call_duration, counters, refunds, retries, retry_after, "
        "cleanup_after, prefix_from): for stores that keep session budgets.")
