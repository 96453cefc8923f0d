"""Whom each shipped race report's verdict blames (issue 24, DESIGN section 12).

Every historical bug is fault-exposed: the store goes wrong only when a reply
is lost, a command re-sent or a replica dies. Replayed, each report's variant
must have the damage it adds over the fixed store (under the same schedule)
filed at least 95% under ``store_logic``, with the fault that exposed it
named; the fixed store, under the same schedule, must have none filed there:
a sound store is never blamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.families import invariants_for
from simulator.plugin.contracts import NO_FAULT, exposed_by_key
from simulator.search.races import load_report, replay
from stores import registry
from tests.blame import blamed_on_the_store, store_logic_excess

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted((REPO / "data" / "races").glob("*.toml"))
STORE_SHARE = 0.95
NOISE = 0.01
"""An invariant the variant did worse on by less than this share of its value
is the two runs' histories parting, not the bug (they differ from the first
fault on: a hold crashed a moment later leaks a moment longer)."""


KNOWN_GAPS: dict[str, str] = {
}
"""Reports whose variant's damage the oracle does not yet file under
``store_logic`` with its exposure (issue 26's catalogue outran the oracles):
each is expected to fail, and a fix makes it pass (strict)."""


def _judged(path: Path):
    reason = KNOWN_GAPS.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_judged(path) for path in REPORTS])
def test_a_race_report_s_damage_is_the_store_s_exposed_by_its_fault(path):
    report = load_report(path)
    variant = replay(report).result.summary
    fixed = replay(report, against_fixed=True).result.summary if report.fixed else None
    invariants = invariants_for(registry.get(variant["store"]))
    judged = []
    for invariant in invariants:
        excess, store = store_logic_excess(invariant, variant, fixed)
        if excess <= NOISE * invariant.badness(variant.get(invariant.metric) or 0):
            continue
        judged.append(invariant.metric)
        assert store >= STORE_SHARE * excess, (
            f"{invariant.metric}: {variant[invariant.metric]} against the fixed store's "
            f"{(fixed or {}).get(invariant.metric)}, of which store_logic {store}: "
            f"{invariant.causes(variant)}")
        assert variant.get(exposed_by_key(invariant.metric)) not in (None, NO_FAULT), (
            f"{invariant.metric}: no exposing fault named")
    assert judged, "the variant did no worse than the fixed store on any invariant"
    if fixed is not None:
        assert blamed_on_the_store(fixed) == {}
