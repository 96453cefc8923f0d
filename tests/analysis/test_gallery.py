"""The race-report gallery: choosing reports, judging replays, and what is shown."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from simulator.analysis import figure_png, lab_path
from simulator.analysis.gallery import (
    SUMMARY_COLUMNS,
    GalleryEntry,
    Side,
    entry_markdown,
    gallery_conclusion,
    replay_side,
    report_paths,
    run_gallery,
    side_by_side,
    stores_named,
    summary_table,
)

RACES = lab_path("data", "races")
CLAIM = "claim-without-slot-loses-spend"


def side(store: str = "variants.x", value: int = -5, broken: bool = True,
         fingerprint: str = "abc", divergence: str | None = None,
         timeline: Path | None = None) -> Side:
    return Side(store=store, value=value, broken=broken, fingerprint=fingerprint,
                divergence=divergence, timeline=timeline)


def entry(name: str = "a-race", variant: Side | None = None, fixed: Side | None = None,
          recorded: str | None = "abc") -> GalleryEntry:
    return GalleryEntry(path=Path(f"/races/{name}.toml"), title=f"{name} breaks",
                        story="It breaks.", invariant="drift broken when < 0", metric="drift",
                        recorded_fingerprint=recorded,
                        variant=variant or side(),
                        fixed=fixed or side(store="redis_v1", value=0, broken=False,
                                            fingerprint="def"))


def copy_report(name: str, directory: Path, old: str = "", new: str = "") -> Path:
    """A report copied elsewhere (scenario path made absolute, recorded trace
    beside it), with one piece of its text replaced."""
    source = RACES / f"{name}.toml"
    text = source.read_text().replace('scenario = "../scenarios/',
                                      f'scenario = "{lab_path("data", "scenarios")}/')
    assert old in text
    copied = directory / source.name
    copied.write_text(text.replace(old, new))
    shutil.copy(source.with_suffix(".trace.parquet"), copied.with_suffix(".trace.parquet"))
    return copied


# ------------------------------------------------------------------ choosing reports


def test_no_names_means_every_report_of_the_catalogue_in_name_order():
    paths = report_paths()
    assert paths == sorted(RACES.glob("*.toml"))
    assert len(paths) >= 4


def test_named_reports_come_in_the_order_given_with_or_without_suffix():
    paths = report_paths(["split-settlement-lost-release-reply", f"{CLAIM}.toml"])
    assert [path.stem for path in paths] == ["split-settlement-lost-release-reply", CLAIM]


def test_an_unknown_report_name_is_refused_with_the_names_available():
    with pytest.raises(ValueError, match="no race report 'nope'.*" + CLAIM):
        report_paths(["nope", CLAIM])


def test_the_store_of_a_side_is_the_store_it_sets_or_its_migration_targets():
    scenario = {"store": "axond_budget.redis_v1"}
    assert stores_named({"store": "v.split", "network.reply_loss": 0.0}, scenario) == "v.split"
    assert stores_named({"migrations.0.to": "v.r", "migrations.1.to": "v.r"}, scenario) == "v.r"
    assert stores_named({"migrations.0.to": "a", "migrations.1.to": "b"}, scenario) == "a, b"
    assert stores_named({"network.reply_loss": 0.0}, scenario) == "axond_budget.redis_v1"


# ------------------------------------------------------------------ judging


def test_an_entry_is_healthy_when_reproduced_recorded_and_held_on_the_fixed_store():
    healthy = entry()
    assert healthy.reproduced and healthy.fingerprint_ok and healthy.fixed_holds
    assert entry(recorded=None).fingerprint_ok is None
    assert entry(variant=side(fingerprint="zzz")).fingerprint_ok is False
    assert entry(variant=side(divergence="event #3: ...")).fingerprint_ok is False
    assert not entry(variant=side(broken=False)).reproduced
    assert not entry(fixed=side(broken=True)).fixed_holds


def test_the_summary_table_has_one_row_per_report_with_its_three_verdicts():
    entries = [entry("a"), entry("b", variant=side(broken=False, value=7)),
               entry("c", recorded=None)]
    table = summary_table(entries)
    assert list(table.columns) == list(SUMMARY_COLUMNS)
    assert list(table["report"]) == ["a", "b", "c"]
    assert list(table["reproduced"]) == [True, False, True]
    assert list(table["fingerprint ok"]) == [True, True, None]
    assert list(table["fixed store holds"]) == [True, True, True]
    assert list(table["variant value"]) == [-5, 7, -5]


def test_the_conclusion_says_healthy_only_when_every_verdict_is():
    assert "catalogue is healthy" in gallery_conclusion([entry("a"), entry("b")])
    assert "All 2 reproduced" in gallery_conclusion([entry("a"), entry("b")])
    broken = gallery_conclusion([entry("a"), entry("b", variant=side(broken=False)),
                                 entry("c", fixed=side(broken=True)),
                                 entry("d", variant=side(fingerprint="zzz"))])
    assert "healthy" not in broken
    assert "3 of 4 reproduced on their variant; not: `b`" in broken
    assert "3 of 4 held on the fixed store; not: `c`" in broken
    assert "3 of 4 replayed the trace recorded beside them; not: `d`" in broken
    assert gallery_conclusion([]) == "No race report was replayed."


def test_the_markdown_gives_both_verdicts_and_where_the_trace_parted():
    text = entry_markdown(entry(variant=side(divergence="event #9: recorded x; now y")))
    assert text.startswith("### a-race breaks")
    assert "**REPRODUCED: drift = -5**" in text
    assert "**HOLDS: drift = 0**" in text
    assert "event #9: recorded x; now y" in text
    assert "NOT REPRODUCED: drift = 3" in entry_markdown(entry(variant=side(broken=False,
                                                                             value=3)))


def test_the_two_timelines_are_laid_side_by_side_each_titled_with_its_verdict(tmp_path):
    pictures = []
    for name, shape in (("variant", (40, 100, 3)), ("fixed", (60, 100, 3))):
        path = tmp_path / f"{name}.png"
        matplotlib.image.imsave(path, np.full(shape, 0.5))
        pictures.append(path)
    figure = side_by_side(entry(variant=side(timeline=pictures[0]),
                                fixed=side(store="redis_v1", value=0, broken=False,
                                           timeline=pictures[1])))
    left, right = figure.axes
    assert "REPRODUCED: drift = -5" in left.get_title()
    assert "HOLDS: drift = 0" in right.get_title()
    assert left.images[0].get_array().shape[:2] == (40, 100)
    assert right.images[0].get_array().shape[:2] == (60, 100)
    assert "a-race breaks" in figure._suptitle.get_text()
    assert figure_png(figure).startswith(b"\x89PNG")


def test_side_by_side_needs_both_timelines():
    with pytest.raises(ValueError, match="no timeline"):
        side_by_side(entry())


# ------------------------------------------------------------------ real replays


def test_a_catalogue_report_reproduces_replays_its_trace_and_holds_on_the_fixed_store(
        tmp_path):
    # Two worker processes, one replay each: the parallel path (the notebook's
    # test runs the in-process one).
    lines: list[str] = []
    (found,) = run_gallery(report_paths([CLAIM]), tmp_path, workers=2, progress=lines.append)
    assert sorted(lines) == [f"replayed {CLAIM} on the fixed store",
                             f"replayed {CLAIM} on the variant"]
    assert found.reproduced and found.fingerprint_ok and found.fixed_holds
    assert found.variant.store == "axond_budget.variants.claim_without_slot"
    assert found.fixed.store == "axond_budget.redis_v2"
    assert found.variant.value < 0 and found.fixed.value == 0
    assert found.variant.timeline == tmp_path / f"{CLAIM}.variant.png"
    assert found.fixed.timeline.read_bytes().startswith(b"\x89PNG")


def test_a_changed_run_is_judged_not_reproduced_and_names_where_its_trace_parted(tmp_path):
    # A later migration changes the trace; an unreachable threshold makes the
    # invariant hold on the variant too.
    copied = copy_report(CLAIM, tmp_path,
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"',
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"\n'
                         '"migrations.0.at" = "1100ms"')
    copied.write_text(copied.read_text().replace('broken_when = "< 0"',
                                                 'broken_when = "< -1000000000"'))
    found = replay_side(copied, against_fixed=False)
    assert not found.broken
    assert found.divergence is not None and found.divergence.startswith("event #")
    assert found.timeline is None
