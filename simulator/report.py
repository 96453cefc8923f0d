"""Human-readable output: the summary table and the scenario field reference."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from simulator.scenario import Scenario
from stores import registry

SECTIONS = (
    ("run", ("scenario", "store", "backend", "seed", "replicas", "virtual_duration_us")),
    ("requests", ("requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                  "requests_denied_exceeded", "requests_denied_store_unavailable",
                  "requests_completed", "requests_in_flight_at_end")),
    ("guarantees", ("cap_overshoot_max_ratio", "cap_overshoot_microdollars_total",
                    "keys_over_cap", "keys_total", "true_spend_microdollars_total",
                    "recorded_spend_microdollars_total", "conservation_drift_microdollars_total",
                    "holds_outstanding_microdollars_at_end")),
    ("faults seen", ("call_executed_count", "request_lost_count", "reply_lost_count",
                     "call_retried_count", "call_timed_out_count", "late_reply_count",
                     "key_expired_count", "replica_boot_failed_count")),
    ("determinism", ("trace_events", "trace_fingerprint")),
)


def _format(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if value is None:
        return "n/a"
    return str(value)


def summary_table(summary: dict[str, Any], run_info: dict[str, Any] | None = None) -> str:
    """The invariant summary, grouped, one metric a line."""
    width = max(len(key) for _, keys in SECTIONS for key in keys)
    lines = []
    for title, keys in SECTIONS:
        lines.append(f"-- {title}")
        lines.extend(f"   {key:<{width}}  {_format(summary[key])}" for key in keys
                     if key in summary)
    if run_info:
        lines.append(
            f"-- wall time {run_info['wall_seconds']}s, "
            f"{run_info['virtual_seconds_per_wall_second']} virtual s per wall s, "
            f"peak RSS {run_info['peak_rss_mib']} MiB"
        )
    return "\n".join(lines)


def _model_fields(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        written = field.alias or name
        path = f"{prefix}{written}"
        annotation = field.annotation
        nested = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if nested and not getattr(annotation, "written_as_text", False):
            rows.append(f"\n[{path}]  {field.description or ''}".rstrip())
            rows.extend(_model_fields(annotation, f"{path}."))
            continue
        if field.is_required():
            default = "(required)"
        elif field.default_factory is not None:
            default = repr(field.default_factory())
        else:
            default = field.default
            default = repr(getattr(default, "value", default))
            if default.startswith(("Arrivals(", "Retries(")):
                default = repr(str(field.default))
        rows.append(f"{path:<42} default {default:<26} {field.description or ''}".rstrip())
    return rows


def fields_reference() -> str:
    """Every scenario field and every store's settings, with defaults."""
    lines = ["# Scenario fields", "", *_model_fields(Scenario, "")]
    for name, kind in sorted(registry.kinds().items()):
        lines += ["", f"# store_settings for {name}: {kind.summary}", ""]
        lines += _model_fields(kind.settings_model, "store_settings.") or ["(none)"]
    return "\n".join(lines)
