"""A hunt guided by the schedules that reached new store lines (``simulator.search.corpus``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings

from simulator.reach.lines import Reach
from simulator.search.corpus import LAG, Corpus, guided
from simulator.search.hunt import Hunt
from simulator.search.strategies import fault, fault_schedules

ROOT = Path(__file__).resolve().parents[2]
LEASES = ROOT / "data" / "scenarios" / "hunt" / "axond-leases.toml"
UNIT = "acquire.lua"
ODD = {"at": "5ms", "fault": "pause", "replica": 4, "duration": "777ms"}
"""A fault no fresh draw below makes (a pause of 777 ms): a draw holding it came
from the corpus."""


def reach(*lines: int) -> str:
    return Reach({UNIT: frozenset(range(1, 10))}, {UNIT: frozenset(lines)}).encode()


def test_the_corpus_keeps_what_reached_new_lines_and_shows_it_only_behind_the_draws() -> None:
    corpus = Corpus(Reach.decode(reach(1, 2)))
    corpus.learn(0, [ODD], reach(1, 2))  # nothing new
    corpus.learn(1, [ODD], reach(2, 3))  # line 3 is new
    corpus.learn(2, [ODD], reach(3))  # no longer new
    assert [number for number, _ in corpus.entries] == [1]
    corpus.calls = LAG + 1
    assert corpus.visible() == []  # schedule 1 is not yet LAG draws behind
    corpus.calls = LAG + 2
    assert corpus.visible() == [[ODD]]


def test_half_the_draws_change_one_fault_of_a_corpus_schedule() -> None:
    corpus = Corpus(None)
    corpus.entries.append((0, [ODD]))
    corpus.calls = LAG + 1
    kinds = ("lose_reply", "crash")
    strategy = guided(fault_schedules(5, "3s", kinds=kinds), corpus, fault(5, "3s", kinds=kinds),
                      5, 3_000_000, 4)
    seen: list[list[dict]] = []

    @settings(max_examples=200, database=None, derandomize=True)
    @given(strategy)
    def collect(schedule: list[dict]) -> None:
        seen.append(schedule)

    collect()
    derived = [schedule for schedule in seen
               if any(item.get("duration") == "777ms" for item in schedule)]
    assert 0.3 < len(derived) / len(seen) < 0.7
    changes = {"retimed": any(item["at"] != "5ms" and item["fault"] == "pause"
                              for schedule in derived for item in schedule),
               "moved": any(item.get("replica") != 4 and item["fault"] == "pause"
                            for schedule in derived for item in schedule),
               "added": any(len(schedule) == 2 for schedule in derived)}
    assert changes == {"retimed": True, "moved": True, "added": True}


def test_a_guided_hunt_breaks_and_shrinks_alike_with_any_number_of_workers(tmp_path) -> None:
    """A mutant dropping the compensating release of a lost acquire: the
    break comes after draws that could derive from the corpus, and the
    shrinking draws the search's schedules again through it."""
    from simulator.mutate.kinds import write_plugin
    from simulator.mutate.python import mutations
    from stores.axond_leases.limiter import LeaseLimiter

    mutation = next(item for item in mutations(LeaseLimiter)
                    if item.line == 197 and item.operator == "call_removed")
    write_plugin(tmp_path, "axond_leases.redis", [("axond_leases.redis.mutant.9501", mutation)])
    seen = []
    for workers in (1, 2):
        hunt = Hunt(LEASES, reference="axond_leases.redis", examples=40, seed=0,
                    kinds=("lose_request", "crash", "pause"), workers=workers, coverage=True,
                    guided=True,
                    overrides={"backend": "fakeredis", "store": "axond_leases.redis.mutant.9501"})
        found = hunt.search()
        assert found is not None and hunt.corpus is not None
        seen.append((found.schedule, found.schedules, hunt.runs, hunt.corpus.entries))
    assert seen[0] == seen[1]
    _, schedules, _, entries = seen[0]
    assert entries[0][0] < schedules - 1 - LAG  # the draws before the break saw a corpus


def test_hunt_says_what_its_runs_reached_and_what_its_corpus_kept(capsys) -> None:
    from simulator.cli import main

    assert main(["hunt", str(LEASES), "--reference", "axond_leases.redis", "--examples", "3",
                 "--backend", "fakeredis", "--guided"]) == 1  # nothing broke
    printed = capsys.readouterr().out
    assert "over the hunt's 4 run(s), store lines reached " in printed
    assert "never reached:\n  stores/axond_leases/acquire.lua: 25\n" in printed
    assert "corpus: " in printed
    assert main(["hunt", str(LEASES), "--reference", "axond_leases.redis", "--examples", "1",
                 "--backend", "fakeredis", "--no-coverage"]) == 1
    assert "store lines reached" not in capsys.readouterr().out
    assert main(["hunt", str(LEASES), "--reference", "axond_leases.redis", "--examples", "1",
                 "--backend", "fakeredis"]) == 1
    printed = capsys.readouterr().out
    assert "store lines reached" in printed and "corpus: " not in printed  # not guided
