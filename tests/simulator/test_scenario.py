"""Scenario files: quantities as people write them, and errors that say what is wrong."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.scenario.distributions import parse_distribution
from simulator.scenario.model import ScenarioError, load_scenario, parse_scenario
from stores.quantities import parse_duration_us, parse_rate_per_second

REPO = Path(__file__).resolve().parents[2]
MINIMAL = {"name": "t", "store": "axond_budget.redis_v1"}


@pytest.mark.parametrize(("text", "microseconds"), [
    ("30s", 30_000_000), ("250ms", 250_000), ("1.5ms", 1_500), ("10m", 600_000_000),
    ("2h", 7_200_000_000), ("1d", 86_400_000_000), ("750us", 750), (0, 0), ("1_000ms", 1_000_000),
])
def test_durations_are_read_as_people_write_them(text, microseconds):
    assert parse_duration_us(text) == microseconds


@pytest.mark.parametrize("text", ["30", 30, "30 parsecs", "-1s", "", True])
def test_a_duration_without_a_known_unit_is_refused(text):
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration_us(text)


@pytest.mark.parametrize("text", ["1e308s", "3651d", "1e400ms"])
def test_a_duration_past_ten_years_is_refused_not_overflowed(text):
    assert parse_duration_us("3650d") == 3650 * 86_400_000_000
    with pytest.raises(ValueError, match="at most 3650d"):
        parse_duration_us(text)


@pytest.mark.parametrize("text", ["1e309/s", "1e400/min"])
def test_a_rate_that_is_not_finite_is_refused(text):
    with pytest.raises(ValueError, match="finite rate"):
        parse_rate_per_second(text)


@pytest.mark.parametrize(("text", "per_second"), [
    ("500/s", 500.0), ("30/min", 0.5), ("1/h", 1 / 3600), ("2/ms", 2000.0),
])
def test_rates_are_read_as_people_write_them(text, per_second):
    assert parse_rate_per_second(text) == pytest.approx(per_second)


def test_distributions_sample_from_their_own_parameters():
    rng = random.Random(3)
    lognormal = parse_distribution("lognormal(40ms, 0.5)", "duration")
    draws = sorted(lognormal.sample(rng) for _ in range(20_001))
    # The median of a lognormal is its first parameter.
    assert draws[10_000] == pytest.approx(40_000, rel=0.03)
    pareto = parse_distribution("pareto(2s, 1.5)", "duration")
    assert min(pareto.sample(rng) for _ in range(1_000)) >= 2_000_000
    uniform = parse_distribution("uniform(0, 6000)", "amount")
    assert all(0 <= uniform.sample(rng) <= 6000 for _ in range(1_000))
    assert parse_distribution(5000, "amount").sample(rng) == 5000


@pytest.mark.parametrize(("text", "message"), [
    ("lognorm(1ms, 0.5)", "unknown distribution 'lognorm'"),
    ("lognormal(1ms)", "lognormal takes (median, sigma)"),
    ("uniform(9ms, 1ms)", "low <= high"),
    ("lognormal(40, 0.5)", "write the unit"),
])
def test_a_bad_distribution_says_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_distribution(text, "duration")


def test_every_field_has_a_default_but_name_and_store():
    scenario = parse_scenario(dict(MINIMAL))
    assert scenario.fleet.replicas == 100
    assert scenario.network.timeout_us == 1_000_000
    assert scenario.duration_us == 60_000_000
    with pytest.raises(ScenarioError, match="name: required field is missing"):
        parse_scenario({"store": "axond_budget.redis_v1"})


def errors_of(data: dict) -> str:
    with pytest.raises(ScenarioError) as failure:
        parse_scenario({**MINIMAL, **data})
    return str(failure.value)


def test_a_bad_value_names_the_field_path_what_was_wanted_and_what_was_given():
    message = errors_of({"network": {"timeout": "200"}, "fleet": {"replicas": "many"}})
    assert "network.timeout: expected a duration" in message
    assert "got '200'" in message
    assert "fleet.replicas:" in message and "'many'" in message


def test_an_unknown_field_lists_the_known_ones():
    message = errors_of({"network": {"reply_los": 0.1}})
    assert "network.reply_los: unknown field" in message
    assert "reply_loss" in message


def test_a_bad_store_setting_is_reported_under_store_settings():
    message = errors_of({"store_settings": {"reservation_ttl": "soon"}})
    assert "store_settings.reservation_ttl: expected a duration" in message


def test_an_unknown_store_lists_the_known_ones():
    message = errors_of({"store": "axond_budget.redis_v9"})
    assert "store: unknown store 'axond_budget.redis_v9'" in message
    assert "axond_budget.redis_v1" in message


def test_a_missing_or_malformed_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(broken)


def test_the_cli_reports_a_bad_scenario_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nstore = "axond_budget.redis_v1"\n[network]\nreply_loss = 2\n')
    result = subprocess.run([sys.executable, "-m", "simulator", "run", str(bad)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2
    assert "network.reply_loss" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_store_on_a_backend_it_cannot_use_is_refused(tmp_path):
    from simulator.run.compose import resolve_backend

    scenario = parse_scenario({**MINIMAL, "backend": "memory"})
    with pytest.raises(ScenarioError, match="runs on 'valkey', 'fakeredis' or 'redis://...'"):
        resolve_backend(scenario, None)


def test_the_fields_reference_in_the_docs_matches_the_code():
    from simulator.present.report import fields_reference, metrics_reference

    documented = (REPO / "docs" / "scenario-fields.txt").read_text()
    # Plugin kinds other tests registered are no part of the shipped reference;
    # the rest is what `fields` prints.
    printed = f"{fields_reference(shipped_only=True)}\n\n{metrics_reference()}"
    assert documented.strip() == printed.strip(), (
        "docs/scenario-fields.txt is stale: regenerate it with "
        "`python -m simulator fields > docs/scenario-fields.txt`"
    )


@pytest.mark.parametrize(("store", "settings"), [
    ("axond_budget.redis_v1", {}),
    ("axond_budget.redis_v2", {"namespace_cap_microdollars": 1_000_000}),
    ("axond_budget.in_memory", {}),
])
@pytest.mark.parametrize("ttl", ["0s", 0, "0ms"])
def test_a_reservation_ttl_of_zero_is_refused_by_every_budget_store(store, settings, ttl):
    message = errors_of({"store": store,
                         "store_settings": {**settings, "reservation_ttl": ttl}})
    assert ("store_settings.reservation_ttl: expected a duration in whole milliseconds, "
            f"more than 0 and at most 3650d, got {ttl!r}") in message


def test_run_refuses_a_zero_or_negative_reservation_ttl_naming_the_field(tmp_path, capsys):
    from simulator.cli import main

    scenario = tmp_path / "ttl.toml"
    scenario.write_text('name = "ttl"\nstore = "axond_budget.redis_v1"\n')
    for ttl in ('"0s"', '"-1s"'):
        code = main(["run", str(scenario), "--quiet", "--out", str(tmp_path / "out"),
                     "--set", f"store_settings.reservation_ttl={ttl}"])
        error = capsys.readouterr().err
        assert code == 2
        assert "store_settings.reservation_ttl:" in error
        assert "Traceback" not in error
    assert not (tmp_path / "out").exists()
