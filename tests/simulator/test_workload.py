"""Workloads: arrival processes, empirical distributions, streamed requests."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from simulator.engine.streams import Streams
from simulator.run.compose import run_scenario
from simulator.scenario.model import ScenarioError, parse_scenario
from simulator.scenario.workload import Workload
from simulator.world.requests import KeySpace, RequestSource

REPO = Path(__file__).resolve().parents[2]
DURATIONS_CSV = REPO / "data" / "workloads" / "durations_ms.csv"
SECOND = 1_000_000


def sources(workload: dict, replicas: int, seed: int = 7,
            until_us: int | None = None) -> list[RequestSource]:
    """One request source per replica, seeded as a run seeds them."""
    model = Workload.model_validate(workload)
    key_space = KeySpace.of(model.keys)
    streams = Streams(seed)
    return [RequestSource(model, key_space, replicas, index,
                          streams.get("replica", index, "workload"), until_us=until_us)
            for index in range(replicas)]


def arrivals(source: RequestSource, until_us: int) -> list:
    """(time, request) pairs before ``until_us``, as the replica's loop takes them."""
    taken, now = [], 0
    while (arrival := source.next_arrival(now)) is not None and arrival[0] < until_us:
        taken.append(arrival)
        now = arrival[0]
    return taken


def within_sigmas(count: int, expected: float, sigmas: float = 4.0) -> bool:
    """A Poisson (or near-Poisson) count agrees with its mean to ``sigmas`` std devs."""
    return abs(count - expected) <= sigmas * math.sqrt(expected)


def workload_error(arrivals_value) -> str:
    data = {"name": "t", "store": "axond_budget.in_memory",
            "workload": {"arrivals": arrivals_value}}
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(data)
    return str(raised.value)


# ------------------------------------------------------------------ poisson

def test_a_fleet_wide_poisson_rate_is_split_over_the_replicas():
    replicas, rate, horizon_us = 20, 500, 60 * SECOND
    total = sum(len(arrivals(source, horizon_us))
                for source in sources({"arrivals": f"poisson({rate}/s)"}, replicas))
    assert within_sigmas(total, rate * horizon_us / SECOND)


def test_a_per_replica_rate_grows_with_the_fleet():
    rate, horizon_us = 20, 60 * SECOND
    for replicas in (5, 20):
        total = sum(len(arrivals(source, horizon_us)) for source in
                    sources({"arrivals": f"poisson({rate}/s) per replica"}, replicas))
        assert within_sigmas(total, replicas * rate * horizon_us / SECOND)


def test_adding_a_replica_leaves_replica_0s_arrivals_unchanged_per_replica():
    workload = {"arrivals": "poisson(50/s) per replica"}
    alone = arrivals(sources(workload, 3)[0], 10 * SECOND)
    grown = arrivals(sources(workload, 4)[0], 10 * SECOND)
    assert [at for at, _ in alone] == [at for at, _ in grown]
    assert alone == grown and len(alone) > 100


def test_a_late_booting_replica_owes_no_missed_arrivals():
    source = sources({"arrivals": "poisson(1000/s) per replica"}, 1)[0]
    at_us, _ = source.next_arrival(5 * SECOND)
    assert 5 * SECOND < at_us < 5 * SECOND + SECOND // 10


@pytest.mark.parametrize("text", [
    "poisson(500/s)", "poisson(5/s) per replica", "bursts(2000/s, on=2s, off=8s)",
    "bursts(2000/s, on=500ms, off=1m) per replica",
])
def test_arrivals_are_spelled_back_as_written(text):
    assert str(Workload(arrivals=text).arrivals) == text


# ------------------------------------------------------------------- bursts

def test_bursts_arrive_only_in_on_windows_at_the_given_rate():
    on_us, off_us, rate, horizon_us = 2 * SECOND, 8 * SECOND, 2000, 100 * SECOND
    workload = {"arrivals": "bursts(2000/s, on=2s, off=8s)"}
    times = [at for source in sources(workload, 10) for at, _ in arrivals(source, horizon_us)]
    assert all(at % (on_us + off_us) < on_us for at in times)
    on_seconds = horizon_us // (on_us + off_us) * on_us / SECOND
    assert within_sigmas(len(times), rate * on_seconds)


def test_bursts_per_replica_run_at_the_rate_on_each_replica():
    workload = {"arrivals": "bursts(100/s, on=1s, off=1s) per replica"}
    for source in sources(workload, 3):
        assert within_sigmas(len(arrivals(source, 60 * SECOND)), 100 * 30)


@pytest.mark.parametrize(("text", "wanted"), [
    ("bursts(2000/s, on=2s)", "bursts takes"),
    ("bursts(2000/s, on=0s, off=1s)", "on window longer than zero"),
    ("poisson(0/s)", "positive, finite rate"),
    ("poisson(5/s) per fleet", "expected 'poisson(RATE)'"),
])
def test_a_bad_arrival_process_says_what_was_expected(text, wanted):
    error = workload_error(text)
    assert "workload.arrivals:" in error and wanted in error and repr(text) in error


# --------------------------------------------------------------- fixed list

FIXED = {"at": ["0ms", "5ms", "5ms", "1s"], "replica": [0, 1, 0, 2],
         "actual": [100, 5000, 7, 0], "subject": ["a", "b", "c", "d"], "duration": ["1ms"] * 4}


def test_a_fixed_list_arrives_exactly_as_listed():
    taken = {index: arrivals(source, 2 * SECOND)
             for index, source in enumerate(sources({"arrivals": FIXED}, 3))}
    assert [(at, r.subject, r.actual_microdollars, r.duration_us) for at, r in taken[0]] == [
        (0, "a", 100, 1_000), (5_000, "c", 7, 1_000)]
    assert [(at, r.subject) for at, r in taken[1]] == [(5_000, "b")]
    assert [(at, r.subject) for at, r in taken[2]] == [(SECOND, "d")]


def test_a_fixed_list_without_replicas_goes_round_robin_and_ignores_the_seed():
    workload = {"arrivals": {"at": ["1ms", "2ms", "3ms"], "estimate": [1, 2, 3]}}
    for seed in (1, 2):
        taken = [arrivals(source, SECOND) for source in sources(workload, 2, seed=seed)]
        assert [[(at, r.estimate_microdollars) for at, r in mine] for mine in taken] == [
            [(1_000, 1), (3_000, 3)], [(2_000, 2)]]


def test_a_listed_arrival_before_boot_waits_for_the_replica():
    source = sources({"arrivals": {"at": ["0ms"]}}, 1)[0]
    assert source.next_arrival(3_000)[0] == 3_000


@pytest.mark.parametrize(("table", "wanted"), [
    ({"at": ["0ms", "1s"], "actual": [1]}, "actual has 1 entries but at has 2"),
    ({"at": ["0ms", "1s"], "replica": [0, 1, 2]}, "replica has 3 entries but at has 2"),
    ({"at": ["1s", "0ms"]}, "expected at in time order, got at[1] = 0us after at[0] = 1s"),
    ({"at": ["0ms", "5"]}, "at[1]: expected a duration"),
    ({"at": ["0ms"], "cost": [1]}, "cost: unknown field; a fixed list takes at, replica"),
    ({"replica": [0]}, "at: required field is missing"),
])
def test_a_bad_fixed_list_names_the_field(table, wanted):
    error = workload_error(table)
    assert "workload.arrivals:" in error and wanted in error


def test_a_fixed_list_must_fit_the_fleet_and_the_duration():
    with pytest.raises(ValueError, match=r"replica\[1\] = 5"):
        sources({"arrivals": {"at": ["0ms", "1ms"], "replica": [0, 5]}}, 3, until_us=SECOND)
    with pytest.raises(ValueError, match=r"at\[1\] = 2s \(it would never arrive\)"):
        sources({"arrivals": {"at": ["0ms", "2s"]}}, 3, until_us=SECOND)


# ---------------------------------------------------------------- empirical

def file_values(path: Path, column: str) -> list[float]:
    with path.open(newline="") as file:
        return [float(row[column]) for row in csv.DictReader(file)]


def test_empirical_durations_draw_only_values_from_the_file_and_keep_its_mean():
    in_ms = file_values(DURATIONS_CSV, "duration_ms")
    duration = Workload(duration="empirical(data/workloads/durations_ms.csv)").duration
    rng = random.Random(3)
    draws = [duration.sample(rng) for _ in range(20_000)]
    assert set(draws) <= {round(ms * 1_000) for ms in in_ms}
    mean = sum(in_ms) / len(in_ms) * 1_000
    sd = math.sqrt(sum((ms * 1_000 - mean) ** 2 for ms in in_ms) / len(in_ms))
    assert duration.mean == pytest.approx(mean)
    assert abs(sum(draws) / len(draws) - mean) <= 4 * sd / math.sqrt(len(draws))
    assert str(duration) == "empirical(data/workloads/durations_ms.csv)"


def test_empirical_amounts_read_the_microdollars_column(tmp_path):
    path = tmp_path / "costs.csv"
    path.write_text("model,microdollars\nsmall,10\nlarge,2500\n")
    actual = Workload(actual_microdollars=f"empirical({path})").actual_microdollars
    rng = random.Random(1)
    assert {actual.sample(rng) for _ in range(200)} == {10, 2500}


@pytest.mark.parametrize(("content", "wanted"), [
    (None, "no such file"),
    ("duration_minutes\n3\n", "expected one column named duration_us or duration_ms"),
    ("duration_ms\n3\nsoon\n", ":3 (duration_ms), got 'soon'"),
    ("duration_ms\n", "at least one value"),
])
def test_a_bad_empirical_file_says_what_is_wrong(tmp_path, content, wanted):
    path = tmp_path / "durations.csv"
    if content is not None:
        path.write_text(content)
    data = {"name": "t", "store": "axond_budget.in_memory",
            "workload": {"duration": f"empirical({path})"}}
    with pytest.raises(ScenarioError, match="workload.duration: ") as raised:
        parse_scenario(data)
    assert wanted in str(raised.value)


def test_an_unknown_distribution_lists_empirical_among_the_known():
    with pytest.raises(ValueError, match="known: constant.*empirical"):
        Workload(duration="empiricl(x.csv)")


# ---------------------------------------------------------------- streaming

def test_streaming_shares_and_cut_streams_settle_the_fraction_they_ran():
    workload = {"duration": "1s", "actual_microdollars": 1_000_000,
                "streaming": {"share": 0.3, "cut_short": 0.2}}
    source = sources(workload, 1)[0]
    requests = [source.next_request() for _ in range(20_000)]
    kinds = [r.kind for r in requests]
    streams = kinds.count("stream") + kinds.count("stream_cut")
    n = len(requests)
    assert abs(streams - 0.3 * n) <= 4 * math.sqrt(n * 0.3 * 0.7)
    assert abs(kinds.count("stream_cut") - 0.2 * streams) <= 4 * math.sqrt(streams * 0.2 * 0.8)
    for request in requests:
        if request.kind == "stream_cut":
            # Scaled by one fraction: equal here because both start at 1_000_000.
            assert request.duration_us == request.actual_microdollars <= SECOND
        else:
            assert (request.duration_us, request.actual_microdollars) == (SECOND, 1_000_000)
    cut = [r.duration_us for r in requests if r.kind == "stream_cut"]
    assert 0.4 * SECOND < sum(cut) / len(cut) < 0.6 * SECOND  # a uniform fraction


def test_without_streaming_every_request_is_unary():
    source = sources({}, 1)[0]
    assert {source.next_request().kind for _ in range(1_000)} == {"unary"}


# --------------------------------------------------------------- end to end

def test_a_run_with_bursts_and_streaming_completes():
    scenario = parse_scenario({
        "name": "bursty-streams", "duration": "6s", "drain": "2s",
        "store": "axond_budget.in_memory", "fleet": {"replicas": 8},
        "workload": {"arrivals": "bursts(400/s, on=1s, off=2s)",
                     "duration": "empirical(data/workloads/durations_ms.csv)",
                     "streaming": {"share": 0.5, "cut_short": 0.5}},
    })
    summary = run_scenario(scenario, seed=5).summary
    assert summary["requests_arrived"] > 0
    assert summary["requests_arrived"] == run_scenario(scenario, seed=5).summary[
        "requests_arrived"]


# ------------------------------------------------------------------ pinned keys


def test_keys_a_fixed_list_pins_are_followed_beside_the_drawn_ones_never_drawn():
    model = Workload.model_validate({
        "keys": {"subjects": 2},
        "arrivals": {"at": ["0ms", "1ms", "2ms"], "namespace": ["team|west", "team|west", "ops"],
                     "subject": ["sub", "sub", "subject-0"]}})
    key_space = KeySpace(1, 2, 0.0)
    drawn = list(key_space.keys)
    key_space.follow_pinned(model.arrivals)
    assert key_space.keys == drawn
    assert key_space.followed == [*drawn, ("team|west", "sub"), ("ops", "subject-0")]
    assert key_space.followed_namespaces == ["ns-0", "team|west", "ops"]


def test_a_pinned_namespace_with_drawn_subjects_is_followed_for_every_subject():
    model = Workload.model_validate({
        "keys": {"subjects": 2}, "arrivals": {"at": ["0ms"], "namespace": ["solo"]}})
    key_space = KeySpace(1, 2, 0.0)
    key_space.follow_pinned(model.arrivals)
    assert key_space.followed[2:] == [("solo", "subject-0"), ("solo", "subject-1")]


def test_drawn_arrivals_follow_only_the_drawn_keys():
    key_space = KeySpace(2, 3, 0.0)
    key_space.follow_pinned(Workload.model_validate({}).arrivals)
    assert key_space.followed == key_space.keys


# --------------------------------------------------------- namespace ids


def test_a_workload_names_its_namespaces_as_the_deployment_does():
    """Tenant ids are the deployment's own, "|" and all; their number is the
    namespaces' count, and subjects are dealt to them round-robin."""
    model = Workload.model_validate(
        {"keys": {"subjects": 5, "namespace_ids": ["acme|eu", "acme|us", "globex"]}})
    assert model.keys.namespaces == 3
    space = KeySpace.of(model.keys)
    assert space.namespaces == ["acme|eu", "acme|us", "globex"]
    assert [namespace for namespace, _ in space.keys] == [
        "acme|eu", "acme|us", "globex", "acme|eu", "acme|us"]
    drawn = {request.namespace for source in sources(
        {"arrivals": "poisson(200/s)", "keys": {"subjects": 5,
                                                 "namespace_ids": ["acme|eu", "globex"]}}, 2)
             for _, request in arrivals(source, SECOND)}
    assert drawn == {"acme|eu", "globex"}


@pytest.mark.parametrize(("keys", "said"), [
    ({"namespaces": 2, "namespace_ids": ["a", "b", "c"]},
     "namespace_ids names 3 namespaces but namespaces is 2"),
    ({"namespace_ids": ["a", "a"]}, "distinct, non-empty namespace ids"),
    ({"namespace_ids": []}, "distinct, non-empty namespace ids"),
])
def test_namespace_ids_that_do_not_name_each_namespace_once_are_refused(keys, said):
    data = {"name": "t", "store": "axond_budget.in_memory", "workload": {"keys": keys}}
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(data, source="my.toml")
    lines = str(raised.value).splitlines()
    assert len(lines) == 1 and "workload.keys" in lines[0] and said in lines[0], lines
