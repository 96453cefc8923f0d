"""``mutate``: generated mutants of a store's Lua, probed on the scenario's own
calls and hunted against the unmutated kind (``simulator.mutate``)."""

from __future__ import annotations

from collections import Counter
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli import main
from simulator.mutate.campaign import SURVIVOR_CLASSES, MutantRow, Options, generate, run_campaign
from simulator.mutate.kinds import mutant_kind, write_plugin
from simulator.mutate.lua import OPERATORS, mutations, tokens
from simulator.mutate.page import SURVIVOR_MEANING
from simulator.mutate.probe import Prober
from simulator.mutate.table import kill_rates, summary_line, write_tables
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from stores import registry

REPO = Path(__file__).resolve().parents[2]
HUNT = REPO / "data" / "scenarios" / "hunt"
LEASES = HUNT / "leases-release-never-retried-quiet.toml"
ACQUIRE = registry.get("axond_leases.redis").scripts["acquire"]


def test_tokens_put_back_are_the_script_and_skip_comments_and_strings():
    found = tokens(ACQUIRE)
    assert all(ACQUIRE[token.offset:token.end] == token.text for token in found)
    assert not any(token.text.startswith("--") for token in found)
    assert "'HSET'" in [token.text for token in found]


def test_every_operator_class_mutates_the_lease_acquire_script_at_one_place_each():
    found = mutations("acquire", ACQUIRE)
    assert set(Counter(mutation.operator for mutation in found)) == set(OPERATORS)
    for mutation in found:
        mutated = mutation.apply(ACQUIRE)
        assert mutated != ACQUIRE
        # One place changed: what is before and after it is the script's own.
        assert mutated.startswith(ACQUIRE[:mutation.offset])
        assert mutated.endswith(ACQUIRE[mutation.offset + len(mutation.old):])
    labels = {mutation.label for mutation in found}
    assert "acquire:31 relational: >= -> >" in labels
    assert "acquire:31 early_return: live >= max_in_flight -> true" in labels
    assert "acquire:22 loop_bound: #entries -> (#entries) - (2)" in labels
    assert ("acquire:38 ttl: lease_ttl_ms * 2 -> math.floor((lease_ttl_ms * 2) / 2)"
            in labels)
    assert "acquire:35 call_removed: redis.call('HSET', KEYS[1], lease_id, now_ms + " \
           "lease_ttl_ms) -> (nothing)" in labels
    assert "acquire:21 call_removed: redis.call('HGETALL', KEYS[1]) -> false" in labels
    # A unary minus is not arithmetic; a KEYS index is index's, not a constant.
    assert not any(mutation.operator == "constant" and mutation.line in (15, 16, 17, 18)
                   for mutation in found)


def test_the_same_script_gives_the_same_mutants_in_the_same_order():
    assert mutations("acquire", ACQUIRE) == mutations("acquire", ACQUIRE)
    only = mutations("acquire", ACQUIRE, ("relational",))
    assert only and {mutation.operator for mutation in only} == {"relational"}


def test_a_set_option_ttl_is_halved_and_dropped():
    script = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\nreturn 1\n"
    ttl = [mutation for mutation in mutations("s", script) if mutation.operator == "ttl"]
    assert [mutation.apply(script).splitlines()[0] for mutation in ttl] == [
        "redis.call('SET', KEYS[1], ARGV[1], 'PX', math.floor((ARGV[2]) / 2))",
        "redis.call('SET', KEYS[1], ARGV[1])"]


def test_a_mutant_kind_runs_its_one_changed_script_under_its_own_name(tmp_path):
    base = registry.get("axond_leases.redis")
    (mutation,) = [found for found in mutations("acquire", ACQUIRE, ("relational",))
                   if found.line == 31 and found.new == ">"]
    module = write_plugin(tmp_path, base.name, [("axond_leases.redis.mutant.9001", mutation)])
    kind = registry.get("axond_leases.redis.mutant.9001")
    assert (tmp_path / f"{module}.py").exists()
    assert tuple(registry.plugins_for([kind.name])) == (module,)
    assert kind.scripts["acquire"] == mutation.apply(ACQUIRE)
    assert kind.scripts["release"] == base.scripts["release"]
    assert mutant_kind(base, "x", mutation).scripts == kind.scripts
    # The mutant admits a fourth lease where three is the limit.
    summary = run_scenario(load_scenario(LEASES, {"store": kind.name})).summary
    assert summary["concurrency_excess_lease_seconds"] > 0


def test_the_probe_tells_a_differing_an_equivalent_a_stillborn_and_an_unrun_mutant():
    base = registry.get("axond_leases.redis")
    prober = Prober(base, load_scenario(LEASES, {"store": base.name}))
    assert prober.calls

    def probed(line: int, operator: str, new: str | None = None) -> str:
        (mutation,) = [found for found in mutations("acquire", ACQUIRE, (operator,))
                       if found.line == line and (new is None or found.new == new)]
        scripts = base.scripts.replacing(acquire=mutation.apply(ACQUIRE))
        return prober.probe(mutation, scripts).outcome

    assert probed(31, "relational", ">") == "differs"
    assert probed(24, "relational", "<") == "equivalent"  # no lease ends exactly now
    assert probed(25, "call_removed") == "not run"  # no lease expires in this run
    broken = mutations("acquire", ACQUIRE, ("relational",))[0]
    stillborn = base.scripts.replacing(acquire=ACQUIRE.replace(
        "if live >= max_in_flight then", "if live >= max_in_flight thne"))
    assert prober.probe(broken, stillborn).outcome == "stillborn"


def test_the_probe_compares_ttls_up_to_the_run_s_length_on_a_still_clock():
    # The plain session scenario's counters live 24 h; it follows them 36 h.
    base = registry.get("av_state.redis")
    body = base.scripts["try_spend"]
    found = {(mutation.line, mutation.operator, mutation.new): mutation
             for mutation in mutations("try_spend", body, ("ttl", "constant", "call_removed"))}
    halved = next(key for key in found if key[:2] == (33, "ttl"))
    dropped = next(key for key in found if key[:2] == (33, "call_removed"))

    def probed(prober: Prober, key: tuple) -> str:
        mutation = found[key]
        return prober.probe(mutation, base.scripts.replacing(
            try_spend=mutation.apply(body))).outcome

    day_and_a_half = Prober(base, load_scenario(HUNT / "av-state.toml", {"store": base.name}))
    assert probed(day_and_a_half, halved) == "differs"  # 12 h: inside the run
    assert probed(day_and_a_half, (33, "constant", "86399")) == "differs"
    hours = Prober(base, load_scenario(HUNT / "av-state.toml",
                                       {"store": base.name, "drain": "10m"}))
    assert probed(hours, halved) == "equivalent"  # 12 h or 24 h: both outlive the run
    assert probed(hours, (33, "constant", "86399")) == "equivalent"
    assert probed(hours, dropped) == "differs"  # no TTL outlives it too, yet is no TTL
    # Wall time does not enter a replay: the same mutant probes the same twice.
    moved = found[(33, "constant", "86401")]
    scripts = base.scripts.replacing(try_spend=moved.apply(body))
    assert day_and_a_half.probe(moved, scripts) == day_and_a_half.probe(moved, scripts)


def test_a_script_only_another_kind_sends_is_not_run_by_the_mutant():
    """The plain budget scenario migrates its v1 fleet to v2: the migration
    runs the target kind's scripts, the same text as the v1 kind's own. A v1
    mutant of a migration script never runs, though a replay by text says so."""
    base = registry.get("axond_budget.redis_v1")
    prober = Prober(base, load_scenario(HUNT / "axond-budget.toml", {"store": base.name}))

    def probed(script: str, line: int, operator: str) -> str:
        body = base.scripts[script]
        (mutation, *_) = [found for found in mutations(script, body, (operator,))
                          if found.line == line]
        return prober.probe(mutation, base.scripts.replacing(**{
            script: mutation.apply(body)})).outcome

    assert any(base.scripts.source("migration_apply") == body for body, _, _ in prober.calls)
    assert probed("migration_apply", 27, "call_removed") == "not run"
    assert probed("reserve_v1", 26, "constant") == "differs"


def test_a_script_that_fails_is_the_store_s_and_the_campaign_says_so(tmp_path):
    rows = run_campaign(LEASES_FIXED(tmp_path), Options(
        operators=("constant",), schedules=2, seconds=60, faults=("lose_reply",)),
        tmp_path / "out", echo=lambda line: None)
    by_change = {(row.line, row.change.split(": ", 1)[1]): row for row in rows}
    # for index = 2, #entries, 2 reads a deadline off a lease id: the script fails.
    failing = by_change[(22, "1 -> 2")]
    # The failed acquires are answered unavailable on a healthy connection: false denials too.
    assert failing.detected and failing.invariants == "false_denials, script_errors"
    assert failing.store_logic_share == 1.0
    assert summary_line(rows).startswith(f"mutate: {len(rows)} mutant(s)")
    rates = {(rate["by"], rate["name"]): rate for rate in kill_rates(rows)}
    # Every mutant that compiles is hunted: judged are those a run reached and
    # that did not behave as the base in every run, whatever the probe said.
    assert all(row.reached is not None or row.detected for row in rows
               if row.survived_as != "stillborn")
    assert rates[("operator", "constant")]["judged"] == sum(
        1 for row in rows if row.detected or row.survived_as == "undetected")


def LEASES_FIXED(tmp_path: Path) -> Path:  # noqa: N802 - reads as the scenario it makes
    """The quiet lease scenario on the fixed store."""
    path = tmp_path / "leases-fixed.toml"
    path.write_text(LEASES.read_text().replace(
        'store = "axond_leases.variants.release_never_retried"', 'store = "axond_leases.redis"'))
    return path


def test_mutate_writes_its_table_and_prints_one_summary_line(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["mutate", str(LEASES_FIXED(tmp_path)), "--operators", "early_return",
                 "--schedules", "1", "--faults", "lose_reply", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 of 1 judged detected (100%)" in printed
    # The reach over every run of the campaign's hunts, and the mutants' reach figure.
    assert "mutate: over the campaign's 1 run(s) (of its mutants), store lines reached" \
        in printed
    assert "reach: 1 of 1 compiling mutants' lines reached (100%)" in printed
    table = pd.read_parquet(out / "mutants.parquet")
    assert list(table["operator"]) == ["early_return"] and bool(table["detected"][0])
    assert "false_denials" in table["invariants"][0]
    assert f"{out / 'mutants.html'}" in printed
    assert escape(table["diff"][0]) in (out / "mutants.html").read_text()


@pytest.mark.parametrize(("flags", "said"), [
    (["--operators", "nope"], "--operators: expected some of"),
    (["--schedules", "-1"], "--schedules: at least 0"),
    (["--workers", "0"], "--workers: at least 1"),
    (["--max-faults", "-1"], "--max-faults: from 1 to 10"),
    (["--budget", "nan"], "expected a duration"),
    (["--out", str(REPO / "README.md")], "is a file; give a directory"),
])
def test_mutate_refuses_a_bad_option_in_one_line(flags, said, capsys):
    assert main(["mutate", str(LEASES), *flags]) == 2
    error = capsys.readouterr().err.strip()
    assert said in error and len(error.splitlines()) == 1


@pytest.mark.parametrize("kind", ["axond_budget.redis_v1", "axond_budget.redis_v2",
                                  "av_state.redis", "axond_leases.redis"])
def test_every_redis_kind_s_mutants_apply(kind):
    base = registry.get(kind)
    found = generate(base, OPERATORS)
    assert len(found) > 20
    for mutation in found:
        mutant_kind(base, f"{kind}.probe", mutation)


def hand_made_rows() -> list[MutantRow]:
    """A detected mutant, one of each survivor class, and one with every
    optional field None: what a page must show without running a campaign."""
    def row(number: int, change: str, diff: str, probe: str, **fields) -> MutantRow:
        return MutantRow(number, f"axond_leases.redis.mutant.{number:04d}", "acquire", 24,
                         change.split(":", 1)[0], change, diff, probe,
                         fields.pop("probe_detail", f"detail of {number}"), **fields)

    diff = ("--- acquire.lua\n+++ acquire.lua (mutant)\n@@ -24 +24 @@\n"
            "-  if deadline_ms <= now_ms then\n+  if deadline_ms < now_ms then\n")
    return [
        row(1, "relational: <= -> >=", diff.replace("< now", ">= now"), "differs",
            detected=True, invariants="concurrency_excess_lease_seconds", schedules=0,
            seconds=0.31, store_logic_share=1.0, exposed_by="no fault"),
        row(2, "relational: <= -> <", diff, "equivalent", survived_as="equivalent",
            schedules=10, seconds=2.5, reached=True),
        row(3, "constant: 1 -> 0", "--- a\n+++ b\n-x = 1\n+x = 0\n", "not run",
            survived_as="not reached", schedules=10, seconds=1.0, reached=False),
        row(4, "call_removed: x -> (nothing)", "--- a\n+++ b\n-f()\n+\n", "stillborn",
            survived_as="stillborn", probe_detail="<string>:3: 'end' expected"),
        row(5, "ttl: t -> t / 2", "--- a\n+++ b\n-t\n+t / 2\n", "differs",
            survived_as="undetected", schedules=10, seconds=3.2),
        row(6, "index: 2 -> 1", "--- a\n+++ b\n-2\n+1\n", "differs", detected=True,
            invariants="leaked_lease_seconds", schedules=None, seconds=None,
            store_logic_share=None, exposed_by=None),
    ]


class PageText(HTMLParser):
    """What a browser would show of a page: the text of each ``<pre>``, each
    table cell's text by the ``id`` of its row, and every tag used."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.pres: list[str] = []
        self.cells: dict[str, list[str]] = {}
        self.tags: set[str] = set()
        self._row: str | None = None
        self._in: str | None = None
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "tr":
            self._row = dict(attrs).get("id")
        if tag == "pre":
            self.pres.append("")
        if tag in ("pre", "td"):
            self._in = tag
        if tag == "td" and self._row:
            self.cells.setdefault(self._row, []).append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "pre":
            self.pres[-1] += data
        elif self._in == "td" and self._row:
            self.cells[self._row][-1] += data


def test_the_page_shows_the_summary_the_rates_the_survivor_classes_and_every_diff(tmp_path):
    rows = hand_made_rows()
    written = write_tables(rows, tmp_path)
    page = tmp_path / "mutants.html"
    assert written[-1] == page
    markup = page.read_text()
    shown = PageText(markup)
    # Each diff is shown as it is, its Lua comparisons escaped in the markup.
    assert shown.pres == [row.diff for row in rows]
    assert "deadline_ms &lt;= now_ms" in markup and "deadline_ms <= now_ms" not in markup
    assert "'end' expected" in shown.cells["mutant-4"][6]
    assert shown.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                          "p", "em", "section", "table", "tr", "th", "td", "details",
                          "summary", "pre"}
    assert escape(summary_line(rows)) in markup
    # The survivor classes with their counts and what each asks of the user.
    survivors = markup[markup.index("id='survivor-classes'"):markup.index("id='mutants'")]
    for name in SURVIVOR_CLASSES:
        assert f"<td>{name}</td><td>1</td><td>{escape(SURVIVOR_MEANING[name])}</td>" \
            in survivors
    assert "Strengthen the scenario" in survivors and escape("the lab's own gap") in survivors
    # One row per mutant: its verdict, and a dash for what it does not have.
    verdicts = {row_id: cells[7] for row_id, cells in shown.cells.items()
                if row_id.startswith("mutant-")}
    assert verdicts == {"mutant-1": "detected", "mutant-2": "survived: equivalent",
                        "mutant-3": "survived: not reached", "mutant-4": "survived: stillborn",
                        "mutant-5": "survived: undetected", "mutant-6": "detected"}
    assert shown.cells["mutant-1"][9:13] == ["0", "0.31", "100%", "no fault"]
    assert shown.cells["mutant-6"][9:13] == ["—"] * 4
    assert shown.cells["mutant-5"][9:11] == ["10", "3.20"]
    assert shown.cells["mutant-2"][10] == "2.50"  # hunted, though its probe saw no change
    assert shown.cells["mutant-4"][10] == "—"  # stillborn: never hunted, no seconds
    # The kill rates: per class, the judged (reached, not equivalent) and detected.
    assert "<tr><td>relational</td><td>1</td><td>1</td><td>100%</td></tr>" in markup
    assert "<tr><td>ttl</td><td>1</td><td>0</td><td>0%</td></tr>" in markup


def test_a_lease_hash_left_without_expiry_is_the_store_s(tmp_path):
    """The gap mutate found: an acquire without its PEXPIRE survived every
    invariant. The lease oracle now counts a hash a command left holding
    leases with no expiry: store_only, so the hunt's fault-free run flags it."""
    base = registry.get("axond_leases.redis")
    (dropped,) = [found for found in mutations("acquire", ACQUIRE, ("call_removed",))
                  if "PEXPIRE" in found.old]
    write_plugin(tmp_path, base.name, [("axond_leases.redis.mutant.9201", dropped)])
    fixed = run_scenario(load_scenario(LEASES_FIXED(tmp_path))).summary
    mutant = run_scenario(load_scenario(LEASES_FIXED(tmp_path),
                                        {"store": "axond_leases.redis.mutant.9201"})).summary
    assert fixed["lease_keys_without_ttl"] == 0 < mutant["lease_keys_without_ttl"]
    assert "with no expiry" in mutant["store_logic_began"]


def test_a_campaign_gives_the_same_mutants_and_verdicts_with_any_number_of_workers(tmp_path):
    def campaign(workers: int) -> list[tuple]:
        rows = run_campaign(LEASES_FIXED(tmp_path), Options(
            operators=("early_return", "exception_swallowed"), schedules=4, seconds=120,
            faults=("lose_reply", "crash"), workers=workers),
            tmp_path / f"out-{workers}", echo=lambda line: None)
        return [(row.kind, row.change, row.probe, row.detected, row.invariants, row.schedules,
                 row.survived_as) for row in rows]

    once = campaign(1)
    assert once and any(detected for _, _, _, detected, _, _, _ in once)
    assert campaign(2) == once


def test_a_lease_counted_past_its_ttl_leaks_on_the_store_s_account_after_it(tmp_path):
    """Another gap mutate found: an acquire reading the TTL from the clock's
    argument writes deadlines decades away. A crashed holder's lease then
    leaks as the crash's until its TTL would have ended, and the store's
    after: a lease may not count longer than its writer's TTL."""
    base = registry.get("axond_leases.redis")
    (misread,) = [found for found in mutations("acquire", ACQUIRE, ("index",))
                  if found.line == 16 and found.new == "1"]
    write_plugin(tmp_path, base.name, [("axond_leases.redis.mutant.9301", misread)])
    plain = REPO / "data" / "scenarios" / "hunt" / "axond-leases.toml"
    crash = {"faults.schedule": [{"at": "1s", "fault": "crash", "replica": 0}]}
    fixed = run_scenario(load_scenario(plain, crash)).summary
    mutant = run_scenario(load_scenario(plain, {**crash,
                                                "store": "axond_leases.redis.mutant.9301"})).summary
    assert (fixed["leaked_lease_seconds_by_store_logic"] == 0
            < fixed["leaked_lease_seconds_by_crash"])
    assert mutant["leaked_lease_seconds_by_store_logic"] > 0
    assert mutant["leaked_lease_seconds_by_crash"] == pytest.approx(
        fixed["leaked_lease_seconds_by_crash"], abs=0.01)
    assert mutant["leases_leaked"] == fixed["leases_leaked"]
