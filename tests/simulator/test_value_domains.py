"""Every scenario value is checked where it is read, against a stated domain.

Numbers are numbers (a boolean or a quoted number is refused), finite, and
within their kind's bounds — counts, amounts, probabilities, durations,
rates, distribution parameters, even those of faults that never fire; values
that must agree (a fault's replica and the fleet, an instant and the run's
end) are checked together when the scenario is read. Each refusal is one line
naming the file and the field, exit 2 from the CLI; and the fields reference
states the very domain that validation enforces.
"""

from __future__ import annotations

import glob
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

from simulator.cli import USER_ERROR, main
from simulator.scenario.conditions import parse_expectation
from simulator.scenario.distributions import SHAPES, UNITS, parse_distribution
from simulator.scenario.domains import describe, of_field
from simulator.scenario.model import (
    Scenario,
    ScenarioError,
    load_scenario,
    parse_scenario,
    set_dotted,
)
from simulator.scenario.workload import MAX_ZIPF_EXPONENT
from simulator.world.requests import KeySpace
from stores import registry
from stores.axond_budget.contract import NamespaceCapSettings, SubjectCapSettings
from stores.domains import MAX_AMOUNT, REDIS_INTEGER_MAX, Domain

REPO = Path(__file__).resolve().parents[2]
SOURCE = "my-scenario.toml"
BASE: dict[str, Any] = {"name": "t", "store": "axond_budget.redis_v1", "duration": "10s",
                        "drain": "5s", "fleet": {"replicas": 4}}


def scenario_with(**changes: Any) -> dict[str, Any]:
    """``BASE`` with dotted-path changes: ``scenario_with(**{"fleet.replicas": 2})``."""
    data = {key: dict(value) if isinstance(value, dict) else value
            for key, value in BASE.items()}
    for path, value in changes.items():
        set_dotted(data, path, value)
    return data


def refusal(**changes: Any) -> str:
    """The one line a scenario with ``changes`` is refused with."""
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(scenario_with(**changes), source=SOURCE)
    lines = str(refused.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{SOURCE}: "), lines[0]
    return lines[0]


# ------------------------------------------------------------- strict types

NUMBER_FIELDS = [
    "fleet.replicas", "seed", "network.reply_loss", "network.retries.count",
    "workload.keys.subjects", "workload.keys.namespaces", "workload.streaming.share",
    "server.maxmemory_keys", "store_settings.subject_cap_microdollars",
]


@pytest.mark.parametrize("path", NUMBER_FIELDS)
@pytest.mark.parametrize(("value", "said"), [
    (True, "got True (a boolean)"),
    ("3", "got '3' (text; write a number without quotes)"),
])
def test_a_boolean_or_text_is_not_a_number(path, value, said):
    line = refusal(**{path: value})
    assert line.startswith(f"{SOURCE}: {path}: expected "), line
    assert said in line


def test_numbers_as_toml_and_notebooks_write_them_are_still_read():
    scenario = parse_scenario(scenario_with(**{
        "fleet.replicas": np.int64(3), "network.reply_loss": 0, "workload.keys.subjects": 5.0,
        "network.request_loss": np.float64(0.25), "metrics.per_key": True}))
    assert scenario.fleet.replicas == 3 and type(scenario.fleet.replicas) is int
    assert scenario.network.reply_loss == 0.0
    assert scenario.workload.keys.subjects == 5
    assert scenario.network.request_loss == 0.25


@pytest.mark.parametrize(("path", "value"), [
    ("metrics.per_key", 1), ("metrics.per_key", "yes"), ("faults.schedule", [
        {"at": "1s", "fault": "lose_reply", "migration": 0}]),
])
def test_a_number_or_text_is_not_a_boolean(path, value):
    assert "expected true or false" in refusal(**{path: value})


def test_retries_that_are_neither_a_count_a_name_nor_a_table_say_what_they_may_be():
    line = refusal(**{"network.retries": True})
    assert "network.retries: expected a count, 'redis-py' or {count" in line


# ------------------------------------------------------------- finite values


@pytest.mark.parametrize(("path", "value", "field"), [
    ("network.reply_loss", float("nan"), "network.reply_loss"),
    ("workload.streaming.cut_short", float("inf"), "workload.streaming.cut_short"),
    ("network.latency", "lognormal(1ms, nan)", "network.latency"),
    ("network.latency", "lognormal(40ms, inf)", "network.latency"),
    ("network.latency", "lognormal(nan, 0.5)", "network.latency"),
    ("fleet.clock_drift_ppm", float("nan"), "fleet.clock_drift_ppm"),
    ("fleet.clock_drift_ppm", "normal(0, inf)", "fleet.clock_drift_ppm"),
    ("workload.estimate_microdollars", float("nan"), "workload.estimate_microdollars"),
    ("workload.actual_microdollars", "uniform(0, 1e999)", "workload.actual_microdollars"),
    # Faults that may never fire: checked when read all the same.
    ("faults.pause", {"rate": "1/h", "duration": "lognormal(1s, nan)"}, "faults.pause.duration"),
    ("faults.crash", {"rate": "0/h", "restart_after": "pareto(1s, inf)"},
     "faults.crash.restart_after"),
    ("faults.slow_reply", {"rate": "1/h", "extra": "normal(1ms, nan)"}, "faults.slow_reply.extra"),
    ("network.retries.count", float("inf"), "network.retries.count"),
])
def test_nan_and_infinity_are_refused_naming_the_field(path, value, field):
    line = refusal(**{path: value})
    assert line.startswith(f"{SOURCE}: {field}: expected "), line
    assert "finite" in line, line


@pytest.mark.parametrize("text", ["1e309/s", "1e308/s", "2000000/s"])
def test_a_rate_past_one_a_microsecond_is_refused_in_faults_and_arrivals(text):
    assert "faults.crash.rate: expected a" in refusal(**{"faults.crash": {"rate": text}})
    assert "workload.arrivals: expected a" in refusal(**{"workload.arrivals": f"poisson({text})"})


def test_the_fastest_rate_is_read():
    parse_scenario(scenario_with(**{"workload.arrivals": "poisson(1000000/s)"}))


# ------------------------------------------------------------- bounds


@pytest.mark.parametrize(("path", "too_far", "said"), [
    ("fleet.replicas", 100_001, "expected an integer from 1 to 100,000, got 100001"),
    ("fleet.replicas", 0, "expected an integer from 1 to 100,000, got 0"),
    ("workload.keys.subjects", 1_000_000_000, "expected an integer from 1 to 1,000,000"),
    ("seed", 2**63, "expected an integer from 0 to 2^63 - 1"),
    ("network.reply_loss", 1.5, "expected a number from 0 to 1, got 1.5"),
    ("network.retries.count", 1001, "expected an integer from 0 to 1,000"),
    ("store_settings.subject_cap_microdollars", MAX_AMOUNT + 1,
     "expected an integer from 0 to 2^53"),
    ("store_settings.subject_cap_microdollars", 1e20, "expected an integer from 0 to 2^53"),
    ("workload.estimate_microdollars", 1e308, "expected an amount (micro-dollars, cost units) "
     "from -2^53 to 2^53, got '1e+308'"),
    ("workload.estimate_microdollars", 2**60, "from -2^53 to 2^53, got 1152921504606846976"),
    ("workload.actual_microdollars", "uniform(0, 1e16)", "from -2^53 to 2^53"),
    ("fleet.clock_drift_ppm", "normal(0, 2e6)", "from -1,000,000 to 1,000,000"),
    ("network.timeout", "3651d", "at most 3650d"),
    ("workload.keys.skew", "zipf(.)", "S a number from 0 to 50 (a steeper skew"),
    ("workload.keys.skew", "zipf(400)", "its weights overflow a double), got 'zipf(400)'"),
    ("workload.keys.skew", "zipf(-1)", "S a number from 0 to 50"),
    ("network.latency", "lognormal(1ms, 21)", "expected a sigma from 0 to 20, got '21'"),
    ("network.latency", "pareto(1ms, 0.05)", "expected a shape from 0.1 to 1000, got '0.05'"),
    ("network.latency", "pareto(0ms, 1.5)", "a positive scale"),
    ("workload.arrivals", {"at": ["1s"], "estimate": [MAX_AMOUNT + 1]}, "estimate[0]"),
    ("workload.sessions", {"counters": {"tokens": {"limit": 2**63}}},
     "workload.sessions.counters.tokens.limit: expected an integer from 0 to 2^63 - 1"),
    ("workload.sessions", {"retries": 10_000}, "expected an integer from 0 to 1,000"),
    ("faults.schedule", [{"at": "1s", "fault": "lose_reply", "replica": 0, "count": 0}],
     "faults.schedule.0.count: expected an integer from 1 to 1,000,000, got 0"),
])
def test_a_value_past_its_domain_is_refused_saying_the_domain(path, too_far, said):
    line = refusal(**{path: too_far})
    assert f"{SOURCE}: {path}" in line
    assert said in line, line


def test_values_at_the_edges_of_their_domains_are_read():
    scenario = parse_scenario(scenario_with(**{
        "seed": 2**63 - 1, "network.reply_loss": 1, "workload.estimate_microdollars": MAX_AMOUNT,
        "workload.keys.skew": f"zipf({MAX_ZIPF_EXPONENT:g})",
        "workload.keys.subjects": 1_000_000, "fleet.clock_drift_ppm": "uniform(-1e6, 1e6)",
        "network.latency": "pareto(3650d, 0.1)", "workload.duration": "lognormal(3650d, 20)",
        "store_settings.subject_cap_microdollars": MAX_AMOUNT,
        "workload.sessions": {"counters": {"tokens": {"amount": REDIS_INTEGER_MAX,
                                                      "limit": REDIS_INTEGER_MAX}}},
    }))
    assert scenario.workload.keys.zipf_exponent == MAX_ZIPF_EXPONENT


def test_the_steepest_skew_over_the_most_subjects_builds_its_key_space():
    # zipf(400) over 10 subjects was a traceback when the run started: the
    # weight 1 / (rank + 1) ** 400 overflows a double from rank 5 on. The
    # domain's corner (exponent 50, a million subjects) stays below it.
    keys = KeySpace(1, 1_000_000, MAX_ZIPF_EXPONENT)
    picks = {keys.pick(random.Random(seed))[1] for seed in range(50)}
    assert picks == {"subject-000000"}


@pytest.mark.parametrize(("unit", "text"), [
    ("duration", "lognormal(3650d, 20)"), ("duration", "pareto(3650d, 0.1)"),
    ("duration", "normal(-3650d, 3650d)"), ("amount", "exponential(9007199254740992)"),
    ("counter", "pareto(9.2e18, 0.1)"), ("ppm", "normal(0, 1000000)"),
])
def test_a_draw_of_the_heaviest_tail_stays_within_its_units_bound(unit, text):
    distribution = parse_distribution(text, unit)
    rng = random.Random(11)
    bound = UNITS[unit].bound
    draws = [distribution.sample(rng) for _ in range(5_000)]
    assert all(isinstance(draw, int) and -bound <= draw <= bound for draw in draws)
    assert bound in draws or -bound in draws, "the tail reaches the bound and is held there"


def test_every_shape_range_is_what_the_distribution_accepts():
    for name, (low, high) in SHAPES.items():
        family = "lognormal(1ms, {})" if name == "sigma" else "pareto(1ms, {})"
        parse_distribution(family.format(low), "duration")
        parse_distribution(family.format(high), "duration")
        with pytest.raises(ValueError, match=f"expected a {name} from"):
            parse_distribution(family.format(high * 2 + 1), "duration")


def test_an_empirical_value_past_its_units_bound_is_refused(tmp_path):
    path = tmp_path / "costs.csv"
    path.write_text("microdollars\n1\n1e17\n")
    line = refusal(**{"workload.actual_microdollars": f"empirical({path})"})
    assert "workload.actual_microdollars: expected a number from 0 to 2^53" in line
    assert ":3 (microdollars), got '1e17'" in line


def test_a_threshold_that_is_not_finite_is_refused():
    with pytest.raises(ValueError, match="expected a finite threshold, got '1e999'"):
        parse_expectation("holds_leaked", "<= 1e999")
    assert "expect.x: expected a finite threshold" in refusal(**{"expect.x": "<= 1e400"})


# ------------------------------------------------------------- cross-field


@pytest.mark.parametrize(("path", "value", "said"), [
    ("faults.schedule", [{"at": "1s", "fault": "crash", "replica": 99_999}],
     "faults.schedule.0.replica: expected a replica from 0 to 3 (fleet.replicas is 4), "
     "got 99999"),
    ("faults.schedule", [{"at": "1s", "fault": "pause", "duration": "1s", "replicas": [0, 4]}],
     "faults.schedule.0.replicas.1: expected a replica from 0 to 3"),
    ("faults.schedule", [{"at": "16s", "fault": "crash", "replica": 0}],
     "faults.schedule.0.at: expected an instant within the run, at most 15s (duration + "
     "drain), got 16s"),
    ("faults.until", "1h", "faults.until: expected an instant within the run"),
    ("migrations", [{"at": "20s", "to": "axond_budget.redis_v2",
                     "settings": {"namespace_cap_microdollars": 1}}],
     "migrations.0.at: expected an instant within the run"),
    ("migrations", [{"at": "1s", "to": "axond_budget.redis_v2", "keep_running": [7],
                     "settings": {"namespace_cap_microdollars": 1}}],
     "migrations.0.keep_running.0: expected a replica from 0 to 3"),
    ("workload.arrivals", {"at": ["1s"], "replica": [9]},
     "workload.arrivals: expected replica numbers 0 to 3"),
    ("workload.arrivals", {"at": ["12s"]}, "workload.arrivals: expected every arrival before"),
])
def test_fields_that_must_agree_are_checked_when_the_scenario_is_read(path, value, said):
    line = refusal(**{path: value})
    assert said in line, line


def test_a_fault_on_the_migration_is_not_checked_against_the_fleet():
    parse_scenario(scenario_with(**{
        "migrations": [{"at": "1s", "to": "axond_budget.redis_v2",
                        "settings": {"namespace_cap_microdollars": 1}}],
        "faults.schedule": [{"at": "2s", "fault": "lose_reply", "migration": True}]}))


def test_every_problem_is_a_line_of_its_own_naming_the_file():
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(scenario_with(**{"fleet.replicas": True, "network.reply_loss": 2}),
                       source=SOURCE)
    lines = str(refused.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["fleet.replicas", "network.reply_loss"]
    assert all(line.startswith(f"{SOURCE}: ") for line in lines)


# ------------------------------------------------------------- the CLI


@pytest.mark.parametrize(("setting", "field"), [
    ('fleet.replicas=true', "fleet.replicas"),
    ('fleet.replicas="500"', "fleet.replicas"),
    ('fleet.clock_drift_ppm=nan', "fleet.clock_drift_ppm"),
    ('workload.estimate_microdollars=nan', "workload.estimate_microdollars"),
    ('workload.estimate_microdollars=1e308', "workload.estimate_microdollars"),
    ('workload.keys.skew="zipf(400)"', "workload.keys.skew"),
    ('faults.schedule=[{at="1s", fault="crash", replica=99999}]', "faults.schedule.0.replica"),
])
@pytest.mark.parametrize("command", ["check", "run"])
def test_the_cli_refuses_a_value_out_of_its_domain_in_one_line_and_exit_2(
        command, setting, field, tmp_path, capsys):
    path = "data/scenarios/exactness-hot-namespace.toml"
    extra = ["--quiet", "--out", str(tmp_path / "out")] if command == "run" else []
    code = main([command, str(REPO / path), "--set", setting, *extra])
    error = capsys.readouterr().err
    assert code == USER_ERROR
    lines = error.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in error, error
    assert lines[0].startswith(f"error: {REPO / path}: {field}: expected "), lines[0]
    assert not (tmp_path / "out").exists()


def test_every_committed_scenario_is_still_read():
    files = sorted(glob.glob(str(REPO / "data/scenarios/**/*.toml"), recursive=True))
    assert files
    for path in files:
        load_scenario(path)


# ------------------------------------------------------------- the reference


def _bounded_fields(model: Any, prefix: str) -> list[tuple[str, Any]]:
    """(dotted path, field) of every bounded number in the plain tables under
    ``model`` (no lists, no optional tables: those need more than one value)."""
    found = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and (
                not getattr(annotation, "written_as_text", False)):
            found += _bounded_fields(annotation, f"{path}.")
            continue
        _, metadata = of_field(field)
        domain = next((item for item in metadata if isinstance(item, Domain)), None)
        highs = [getattr(item, "le", None) for item in metadata if hasattr(item, "le")]
        if domain is not None and domain.kind in ("an integer", "a number") and highs:
            found.append((path, field))
    return found


def _scenario_bounded_fields() -> list[tuple[str, Any]]:
    fields = _bounded_fields(Scenario, "")
    for name, kind in sorted(registry.shipped().items()):
        fields += [(f"{name}|store_settings.{path}", field)
                   for path, field in _bounded_fields(kind.settings_model, "")
                   # The v1 layout takes no namespace cap at all, in or out of its domain.
                   if not (issubclass(kind.settings_model, SubjectCapSettings)
                           and path == "namespace_cap_microdollars")]
    return fields


@pytest.mark.parametrize(("path", "field"), _scenario_bounded_fields(),
                         ids=[path for path, _ in _scenario_bounded_fields()])
def test_the_reference_states_the_bound_that_validation_enforces(path, field):
    store, _, path = path.rpartition("|")
    base: dict[str, Any] = {"store": store} if store else {}
    if store and issubclass(registry.get(store).settings_model, NamespaceCapSettings):
        base["store_settings.namespace_cap_microdollars"] = 1
    stated = describe(of_field(field))
    high = next(item.le for item in of_field(field)[1] if hasattr(item, "le"))
    high = int(high) if float(high).is_integer() else high
    assert f"to {high:,}" in stated.replace("2^53", f"{2**53:,}").replace(
        "2^63 - 1", f"{2**63 - 1:,}"), stated
    reference = (REPO / "docs" / "scenario-fields.txt").read_text()
    assert f"domain: {stated}" in reference
    parse_scenario(scenario_with(**{**base, path: high}))
    past = high + 1 if isinstance(high, int) else high * 2
    assert f"{path}: expected {stated}, got {past!r}" in refusal(**{**base, path: past})
