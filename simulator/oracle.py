"""The oracle: what really happened, against what the store recorded.

The simulator knows the truth: which requests were admitted, which finished
their upstream work and what each really spent. The store's view is read from
the backend (or the replicas' memory) by the store kind's ``inspect``, without
going through the network. Every metric is computed from those two; none is
assumed.

Definitions (per budget key; aggregated as sum or max over keys):

* **true spend**: the sum of ``actual`` over admitted requests whose upstream
  work completed, whether or not their settlement reached the store.
* **recorded spend**: the settled spend the store holds at the end.
* **conservation drift**: recorded − true (negative: spend the store never
  saw; positive: double charges).
* **cap overshoot**: ``max(0, true spend − cap)``; reported as the largest
  ratio to the cap, the total, and the number of keys over their cap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

Key = tuple[str, str]


class BudgetOracle:
    """Truth and record for budget stores."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.true_spend: dict[Key, int] = defaultdict(int)
        self.keys_seen: set[Key] = set()
        self.in_flight = 0

    def arrived(self, key: Key) -> None:
        self.counts["requests_arrived"] += 1
        self.keys_seen.add(key)

    def admitted(self, held: bool) -> None:
        self.counts["requests_admitted"] += 1
        if not held:
            self.counts["requests_admitted_unenforced"] += 1
        self.in_flight += 1

    def denied(self, reason: str) -> None:
        self.counts["requests_denied"] += 1
        self.counts[f"requests_denied_{reason}"] += 1

    def completed(self, key: Key, actual_microdollars: int) -> None:
        self.counts["requests_completed"] += 1
        self.true_spend[key] += actual_microdollars

    def settled(self) -> None:
        self.counts["requests_settled"] += 1
        self.in_flight -= 1

    def summary(self, recorded: Callable[[Key], Any], subject_cap: int | None) -> dict[str, Any]:
        """The budget metrics, with the store's record read through ``recorded``."""
        keys = sorted(self.keys_seen)
        record = {key: recorded(key) for key in keys}
        true_total = sum(self.true_spend.values())
        recorded_total = sum(r.spent_microdollars for r in record.values())
        drifts = [record[key].spent_microdollars - self.true_spend.get(key, 0) for key in keys]
        metrics: dict[str, Any] = {
            name: self.counts.get(name, 0)
            for name in (
                "requests_arrived",
                "requests_admitted",
                "requests_admitted_unenforced",
                "requests_denied",
                "requests_denied_exceeded",
                "requests_denied_store_unavailable",
                "requests_completed",
                "requests_settled",
            )
        }
        metrics["requests_in_flight_at_end"] = self.in_flight
        metrics["keys_total"] = len(keys)
        metrics["true_spend_microdollars_total"] = true_total
        metrics["recorded_spend_microdollars_total"] = recorded_total
        metrics["conservation_drift_microdollars_total"] = recorded_total - true_total
        metrics["conservation_undercount_microdollars_total"] = -sum(d for d in drifts if d < 0)
        metrics["conservation_overcount_microdollars_total"] = sum(d for d in drifts if d > 0)
        metrics["holds_outstanding_microdollars_at_end"] = sum(
            r.held_microdollars for r in record.values()
        )
        metrics.update(overshoot(self.true_spend.items(), subject_cap))
        return metrics


def overshoot(true_spend: Iterable[tuple[Key, int]], cap: int | None) -> dict[str, Any]:
    """Cap overshoot of every key against one per-key cap (None: no cap)."""
    if cap is None:
        return {"cap_overshoot_max_ratio": None, "cap_overshoot_microdollars_total": None,
                "keys_over_cap": None}
    excess = [max(0, spent - cap) for _, spent in true_spend]
    worst = max(excess, default=0)
    return {
        "cap_overshoot_max_ratio": round(worst / cap, 9) if cap else (0.0 if not worst else None),
        "cap_overshoot_microdollars_total": sum(excess),
        "keys_over_cap": sum(1 for value in excess if value > 0),
    }
