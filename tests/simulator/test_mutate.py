"""``mutate``: generated mutants of a store's Lua, probed on the scenario's own
calls and hunted against the unmutated kind (``simulator.mutate``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli import main
from simulator.mutate.campaign import Options, generate, run_campaign
from simulator.mutate.kinds import mutant_kind, write_plugin
from simulator.mutate.lua import OPERATORS, mutations, tokens
from simulator.mutate.probe import Prober
from simulator.mutate.table import kill_rates, summary_line
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario
from stores import registry

REPO = Path(__file__).resolve().parents[2]
LEASES = REPO / "data" / "scenarios" / "hunt" / "leases-release-never-retried-quiet.toml"
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


def test_a_script_that_fails_is_the_store_s_and_the_campaign_says_so(tmp_path):
    rows = run_campaign(LEASES_FIXED(tmp_path), Options(
        operators=("constant",), schedules=2, seconds=60, faults=("lose_reply",)),
        tmp_path / "out", echo=lambda line: None)
    by_change = {(row.line, row.change.split(": ", 1)[1]): row for row in rows}
    # for index = 2, #entries, 2 reads a deadline off a lease id: the script fails.
    failing = by_change[(22, "1 -> 2")]
    assert failing.detected and failing.invariants == "script_errors"
    assert failing.store_logic_share == 1.0
    assert summary_line(rows).startswith(f"mutate: {len(rows)} mutant(s)")
    rates = {(rate["by"], rate["name"]): rate for rate in kill_rates(rows)}
    assert rates[("operator", "constant")]["judged"] == sum(
        1 for row in rows if row.probe == "differs")


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
    table = pd.read_parquet(out / "mutants.parquet")
    assert list(table["operator"]) == ["early_return"] and bool(table["detected"][0])
    assert "false_denials" in table["invariants"][0]


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


def test_mutate_refuses_a_store_that_runs_no_lua(capsys):
    assert main(["mutate", str(REPO / "data" / "scenarios" / "hunt" / "tollgate.toml")]) == 2
    assert "runs no Lua scripts" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["axond_budget.redis_v1", "axond_budget.redis_v2",
                                  "av_state.redis", "axond_leases.redis"])
def test_every_redis_kind_s_mutants_apply(kind):
    base = registry.get(kind)
    found = generate(base, OPERATORS)
    assert len(found) > 20
    for mutation in found:
        mutant_kind(base, f"{kind}.probe", mutation)
