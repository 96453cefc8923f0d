"""The race-report catalogue replays, and replay tells what changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simulator.cli import main
from simulator.present.marks import Outage, timeline_of
from simulator.present.timeline import draw_timeline
from simulator.scenario.model import ScenarioError
from simulator.search.races import involved_events, load_report, replay, timeline_sampling

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted((REPO / "data" / "races").glob("*.toml"))


def copy_report(source: Path, directory: Path, old: str = "", new: str = "") -> Path:
    """A copy of a report elsewhere (its scenario path made absolute), with a change."""
    text = source.read_text().replace('scenario = "../scenarios/',
                                      f'scenario = "{REPO}/data/scenarios/')
    copied = directory / source.name
    copied.write_text(text.replace(old, new))
    return copied


@pytest.mark.parametrize("path", REPORTS, ids=lambda path: path.stem)
def test_every_report_reproduces_on_its_variant_and_holds_on_the_fixed_store(path):
    report = load_report(path)
    broken = replay(report)
    assert broken.reproduced, (report.invariant, broken.value)
    assert broken.divergence is None
    assert broken.result.summary["trace_fingerprint"] == report.fingerprint
    fixed = replay(report, against_fixed=True)
    assert not fixed.reproduced, (report.invariant, fixed.value)


CLUSTER_ONLY = [path for path in REPORTS if '"server.cluster.shards"' in path.read_text()]


@pytest.mark.parametrize("path", CLUSTER_ONLY, ids=lambda path: path.stem)
def test_a_cluster_only_report_holds_on_one_server(path, tmp_path):
    """Its variant breaks on the simulated cluster (above) and nowhere else:
    the same report without the cluster holds."""
    text = path.read_text()
    cluster_lines = [line for line in text.splitlines()
                     if line.startswith('"server.cluster.')]
    copied = copy_report(path, tmp_path)
    copied.write_text("\n".join(line for line in copied.read_text().splitlines()
                                if line not in cluster_lines) + "\n")
    one_server = replay(load_report(copied))
    assert not one_server.reproduced, one_server.value
    assert one_server.result.summary["shards"] == 1


def test_the_catalogue_has_reports_that_break_only_on_a_cluster():
    assert len(CLUSTER_ONLY) >= 2


def test_the_catalogue_readme_lists_every_report():
    readme = (REPO / "data" / "races" / "README.md").read_text()
    assert len(REPORTS) >= 4
    for path in REPORTS:
        assert f"`{path.stem}`" in readme


def test_a_changed_trace_is_reported_with_the_first_event_that_differs(tmp_path):
    source = REPO / "data" / "races" / "claim-without-slot-loses-spend.toml"
    copied = copy_report(source, tmp_path,
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"',
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"\n'
                         '"migrations.0.at" = "1100ms"')
    shutil.copy(source.with_suffix(".trace.parquet"), copied.with_suffix(".trace.parquet"))
    found = replay(load_report(copied))
    assert found.divergence is not None
    assert found.divergence.startswith("event #")
    assert "recorded t=" in found.divergence and "now t=" in found.divergence


def test_replay_exits_1_when_the_invariant_holds(tmp_path):
    source = REPO / "data" / "races" / "split-settlement-lost-release-reply.toml"
    unbroken = copy_report(source, tmp_path, 'store = "axond_budget.variants.split_settlement"',
                           'store = "axond_budget.redis_v1"')
    result = subprocess.run([sys.executable, "-m", "simulator", "replay", str(unbroken)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1
    assert "NOT REPRODUCED: conservation_drift_microdollars_total = 0 instead" in result.stdout


def test_a_report_without_an_invariant_is_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\nscenario = "x.toml"\nseed = 1\n[variant]\n')
    with pytest.raises(ScenarioError, match="missing invariant"):
        load_report(bad)


def test_replay_draws_the_timeline_of_the_race(tmp_path):
    picture = tmp_path / "timeline.png"
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "replay",
         str(REPO / "data/races/split-settlement-lost-release-reply.toml"), "--plot",
         str(picture)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert f"timeline: {picture}" in result.stdout
    assert "trace fingerprint matches the report" in result.stdout  # sampling changed nothing
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size > 20_000


# -- where the story starts, and what the timeline shows ------------------------

SPLIT = REPO / "data" / "races" / "split-settlement-lost-release-reply.toml"


@pytest.fixture(scope="module")
def split_settlement():
    """The split-settlement race replayed with per-key samples, as --trace and --plot do."""
    report = load_report(SPLIT)
    return report, replay(report, sample_every=timeline_sampling(report))


def test_the_story_starts_at_the_fault_so_the_lost_replies_at_one_second_show(split_settlement):
    report, found = split_settlement
    story = involved_events(found.result, report)
    assert story[0].startswith("... (") and "earlier)" in story[0]
    told = story[1:]
    assert told[0] < "t=1.000000s" and "fault_lose_reply HDEL" in "\n".join(told[:20])
    assert any("reply_lost HDEL" in line for line in told)
    assert any("call_timed_out HDEL" in line for line in told)


def test_trace_options_widen_the_window_or_raise_the_limit(split_settlement):
    report, found = split_settlement
    from_start = involved_events(found.result, report, start_us=0, limit=3)
    assert len(from_start) == 4 and from_start[-1].startswith("... (")
    assert from_start[0].startswith("t=0.")
    everything = involved_events(found.result, report, start_us=0, limit=0)
    assert not any(line.startswith("... (") for line in everything)
    assert len(everything) == 3 + int(from_start[-1].split("(")[1].split()[0])
    wider = involved_events(found.result, report, before=50)
    default = involved_events(found.result, report)
    assert int(wider[0].split("(")[1].split()[0]) == int(default[0].split("(")[1].split()[0]) - 45


def test_replay_trace_from_the_command_line_tells_the_lost_replies(capsys):
    assert main(["replay", str(SPLIT), "--trace", "--trace-from", "1.05s",
                 "--trace-limit", "10"]) == 0
    out = capsys.readouterr().out
    assert "reply_lost HDEL" in out and "t=0." not in out
    assert "--trace-limit 0 shows every event" in out


def test_the_timeline_names_the_lanes_it_leaves_out_and_draws_the_gap_on_its_own_axis(
        split_settlement, monkeypatch, tmp_path):
    report, found = split_settlement
    timeline = timeline_of(found.result, report.schedule)
    assert timeline.shown == tuple(range(8)) and timeline.more == "+2 more: 8, 9"
    drift = next(line for line in timeline.record.gaps if line.label.startswith("drift"))
    assert drift.values[-1] == -12305  # the run's whole drift, summed over its keys
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: figures.append(figure))
    draw_timeline(found.result, tmp_path / "t.png", report.schedule, title=report.title)
    lanes, record, gap = figures[0].axes
    assert "+2 more: 8, 9" in [label.get_text() for label in lanes.get_yticklabels()]
    assert gap.get_ylabel() == "gap (micro-dollars)"
    low, high = gap.get_ylim()
    assert low < -12305 < high < 12305  # scaled to the gap, not to the 500,000 total
    faults_lane = len(timeline.shown)  # labels sit in the faults lane, above every replica
    assert lanes.texts and all(text.xy[1] > faults_lane - 0.5 for text in lanes.texts)


def test_a_pause_is_drawn_as_a_span_for_as_long_as_it_lasts():
    report = load_report(REPO / "data" / "races"
                         / "tollgate-late-release-forfeited-without-grace.toml")
    found = replay(report, sample_every=timeline_sampling(report))
    timeline = timeline_of(found.result, report.schedule)
    assert Outage(1, 115_000, 1_115_000, "pause") in timeline.outages
    (pause,) = timeline.faults
    assert (pause.time_us, pause.end_us, pause.label) == (115_000, 1_115_000,
                                                          "pause 1s on replica 1")


def test_a_spend_served_the_instant_it_arrives_is_drawn_with_a_width(monkeypatch, tmp_path):
    """A ledger's spends are funded by a lease already held: they end where they
    begin, and a bar of no width is no bar at all."""
    report = load_report(REPO / "data" / "races"
                         / "tollgate-late-release-forfeited-without-grace.toml")
    found = replay(report, sample_every=timeline_sampling(report))
    timeline = timeline_of(found.result, report.schedule)
    instant = [bar for bar in timeline.bars if bar.end_us == bar.start_us]
    assert instant, "the race has spends served as they arrive"
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: figures.append(figure))
    draw_timeline(found.result, tmp_path / "t.png", report.schedule, title=report.title)
    widths = [patch.get_width() for patch in figures[0].axes[0].patches]
    assert len(widths) >= len(timeline.bars) and min(widths) > 0
    # The conservation residual stays at 0 here: drawn above the zero line, not under it.
    gap = figures[0].axes[2]
    zero = next(line for line in gap.lines if not line.get_label() or
                line.get_label().startswith("_"))
    residual = next(line for line in gap.lines if line.get_label() == "conservation residual")
    assert residual.get_zorder() > zero.get_zorder()


def test_against_fixed_on_a_report_without_a_fixed_store_says_so_and_runs_nothing(
        tmp_path, capsys):
    copied = copy_report(SPLIT, tmp_path)
    text = copied.read_text()
    start = text.index("[fixed]")
    copied.write_text(text[:start] + text[text.index("[[schedule]]"):])
    assert main(["replay", str(copied), "--against", "fixed"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert "nothing to compare against" in line and "[fixed]" in line


def test_an_armed_fault_is_drawn_where_it_hit_not_where_it_was_armed():
    """The re-sent refund race arms a lost reply at 0 s; the refund it hits
    comes at 45.9 s, and that is where the timeline marks it."""
    report = load_report(REPO / "data" / "races" / "av-state-re-sent-refund-mints-budget.toml")
    found = replay(report, sample_every=timeline_sampling(report))
    (mark,) = timeline_of(found.result, report.schedule).faults
    trace = found.result.trace.to_table().to_pylist()
    lost = [row["time_us"] for row in trace
            if row["kind"] == "reply_lost" and row["outcome"] == "scheduled"]
    assert mark.time_us == min(lost) > 45_000_000 and mark.armed_us == 0
    assert mark.label.endswith("armed at 0s")


def test_no_legend_hides_what_its_panel_draws(monkeypatch, tmp_path):
    report = load_report(REPO / "data" / "races" / "leases-abandoned-acquire-left-to-its-ttl.toml")
    found = replay(report, sample_every=timeline_sampling(report))
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: figures.append(figure))
    draw_timeline(found.result, tmp_path / "t.png", report.schedule, title=report.title)
    (figure,) = figures
    renderer = FigureCanvasAgg(figure).get_renderer()
    for axes in figure.axes:
        legend = axes.get_legend()
        assert legend is not None
        inside = legend.get_window_extent(renderer).overlaps(axes.get_window_extent(renderer))
        assert not inside, f"the legend of {axes.get_title(loc='left') or axes.get_ylabel()}"
