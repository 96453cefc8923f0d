"""Human-readable output: the summary table (the scenario field reference, which
the CLI reads from here too, is ``simulator.scenario.reference``).

The summary table shows every metric of a run, in its family's groups (each
scope of a family that has several: the budget family's subjects and
namespaces); ``simulator.present.diff`` groups a comparison the same way.
"""

from __future__ import annotations

from typing import Any

from simulator.families import families, family_of
from simulator.plugin.contracts import BEGAN, BEGAN_AT, BEGAN_REQUEST, EXPOSED_BY_SUFFIX
from simulator.reach.lines import REACH, REACHED, REPLAY_DIVERGED, STATE, TOTAL
from simulator.run.summary import (
    BACKEND_TOTALS,
    COUNTED_EVENTS,
    DETERMINISM,
    INCONCLUSIVE,
    RUN_FIELDS,
    RUN_TOTALS,
    STORE_RAISED,
    TEXT_FIELDS,
)
from simulator.scenario.reference import fields_reference  # noqa: F401 (the CLI's `fields`)
from stores import registry

CLOSING_SECTIONS = (
    ("the store's own damage, exposed by", (f"*{EXPOSED_BY_SUFFIX}", BEGAN, BEGAN_AT,
                                             BEGAN_REQUEST)),
    ("what happened", (INCONCLUSIVE, STORE_RAISED, "*_count", *RUN_TOTALS)),
    ("server work", tuple(name for names in BACKEND_TOTALS.values() for name in names)),
    ("store lines reached (--coverage)", (REACHED, TOTAL, REPLAY_DIVERGED, STATE)),
    ("determinism", DETERMINISM),
)
"""The groups after the family's own, for every family."""
OTHER = "other"
"""The group of the metrics no other group names: a summary hides nothing."""


def sections(summary: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """The summary's groups: the run, its store family's groups, then what
    happened. A store no longer registered (a plugin not loaded) shows the
    core groups only."""
    try:
        kind = registry.get(summary["store"])
        family = family_of(kind)
        run = RUN_FIELDS + tuple(family.summary.run_facts(kind))
    except (KeyError, ValueError):
        # A plugin's store, its plugin not loaded here (``diff`` of its
        # results, say): the family whose groups name most of the metrics.
        family = _family_by_metrics(summary)
        if family is None:
            return [("run", RUN_FIELDS), *CLOSING_SECTIONS]
        run = RUN_FIELDS
    exposed, happened, *rest = CLOSING_SECTIONS
    happened = (happened[0], (*happened[1], *(name for name, _ in family.migration_totals)))
    return [("run", run), *family.summary.sections, exposed, happened, *rest]


def _family_by_metrics(summary: dict[str, Any]) -> Any:
    """The family whose summary groups name the most of ``summary``'s
    metrics; None when none names any, or two name as many."""
    named = sorted(((len(_matching(summary, tuple(pattern for _, patterns in
                                                  family.summary.sections
                                                  for pattern in patterns), zeros=True)),
                     protocol) for protocol, family in families().items()), reverse=True)
    if not named or named[0][0] == 0 or (len(named) > 1 and named[1][0] == named[0][0]):
        return None
    return families()[named[0][1]]


def figure(value: Any) -> str:
    """A metric's value as the console shows it: ``12,305``, ``572,938.855``, ``n/a``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}"
    if value is None:
        return "n/a"
    return str(value)


def _matching(summary: dict[str, Any], patterns: tuple[str, ...],
              zeros: bool = False) -> list[str]:
    """Keys named by ``patterns``: a plain name, ``*_suffix``, or ``*prefix_``
    (a wildcard pattern shows only the metrics that are not zero, unless ``zeros``)."""
    keys = []
    for pattern in patterns:
        if not pattern.startswith("*"):
            keys += [pattern] if pattern in summary else []
            continue
        part = pattern[1:]
        keys += [key for key, value in summary.items()
                 if (key.endswith(part) if part.startswith("_") else key.startswith(part))
                 and (value or zeros)]
    return keys


def grouped(summary: dict[str, Any], zeros: bool = False) -> list[tuple[str, list[str]]]:
    """The summary's metrics by group, each in the first group that names it,
    and those no group names under ``other``: every metric, every scope,
    has its place. A wildcard's zeros are left out unless ``zeros``; a group
    that names metrics, none of which the summary has, is left out (a run
    without a namespace cap has no namespace scope)."""
    placed: set[str] = set()
    groups = []
    for title, patterns in sections(summary):
        keys = [key for key in dict.fromkeys(_matching(summary, patterns, zeros))
                if key not in placed]
        placed.update(_matching(summary, patterns, zeros=True))
        if keys or not patterns:
            groups.append((title, keys))
    # The reach's whole record is told in words (``Reach.account``), not as a figure.
    rest = [key for key in summary if key not in placed and key != REACH]
    if rest:
        groups.append((OTHER, rest))
    return groups


def summary_table(summary: dict[str, Any], run_info: dict[str, Any] | None = None) -> str:
    """The invariant summary, grouped, one metric a line."""
    groups = grouped(summary)
    width = max((len(key) for _, keys in groups for key in keys), default=0)
    lines = []
    for title, keys in groups:
        lines.append(f"-- {title}")
        lines += [f"   {key:<{width}}  {figure(summary[key])}" for key in keys]
    if run_info:
        lines.append(
            f"-- wall time {run_info['wall_seconds']}s, "
            f"{run_info['virtual_seconds_per_wall_second']} virtual s per wall s, "
            f"peak RSS {run_info['peak_rss_mib']} MiB"
        )
    return "\n".join(lines)


def metrics_reference(known: Any = None, store: str | None = None) -> str:
    """The summary's keys, in the groups the summary table shows them: those
    of every run (the core's schema), or, given ``known`` (a scenario's
    ``simulator.run.preflight.KnownMetrics``) and its ``store``, every metric
    a run of that scenario reports, its family's included."""
    if known is None:
        lines = ["# Summary keys of every run", "",
                 "A family adds its own (.venv/bin/python -m simulator fields --metrics SCENARIO "
                 "lists a scenario's whole summary).", ""]
        names = (*RUN_FIELDS, *(f"{event}_count" for event in COUNTED_EVENTS),
                 *RUN_TOTALS, *(name for names in BACKEND_TOTALS.values() for name in names),
                 *DETERMINISM)
        summary = dict.fromkeys(names, 0)
    else:
        lines = [f"# Summary keys of a run of store {store}", ""]
        summary = {**dict.fromkeys(TEXT_FIELDS, 0), "store": store,
                   **dict.fromkeys(known.names, 0)}
    for title, keys in grouped(summary, zeros=True):
        lines.append(f"-- {title}")
        lines += [f"   {key}" + ("  (text)" if key in TEXT_FIELDS else "") for key in keys]
    if known is not None and known.open_prefixes:
        lines += ["", "and, as they happen, any metric named "
                  + ", ".join(f"{prefix}*" for prefix in known.open_prefixes)]
    return "\n".join(lines)
