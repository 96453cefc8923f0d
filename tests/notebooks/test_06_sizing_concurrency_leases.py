"""The lease-sizing notebook runs end to end on two tiny sweeps, writes its
figures as PNGs and prints the region the analysis computes from its runs."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, outputs_of, printed_by

from simulator.analysis import leases
from simulator.sweeps import read_results, results_dir_for

NAME = "06_sizing_concurrency_leases"
FIGURES = ("denials-vs-erlang-b", "costs-vs-lease-ttl", "recommended-region")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def small_parameters(tmp_path: Path) -> dict:
    """Two limits, one load, two TTLs, two seeds, a dozen replicas for a few
    virtual seconds: seconds of work for the 4 + 8 runs."""
    return {
        "seeds": 2,
        "limits": [4, 6],
        "arrivals": ["poisson(8/s)"],
        "lease_ttls": ["500ms", "5s"],
        "set_fields": {"duration": "8s", "drain": "4s", "fleet.replicas": 12},
        "crash_rate": "3/m",
        "results_dir": str(tmp_path / "results"),
        "workers": 2,
    }


def test_the_notebook_writes_its_figures_and_prints_the_computed_region(tmp_path: Path):
    parameters = small_parameters(tmp_path)
    notebook = execute_notebook(NAME, parameters, tmp_path)
    assert len(figures_of(notebook)) == len(FIGURES)
    written = tmp_path / "results" / "figures"
    for name in FIGURES:
        assert (written / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name

    # The region it printed is the one the tested analysis gives for its runs.
    sweep = leases.load_lease_sweep(
        "data/sweeps/lease-sizing.toml", seeds=2, limits=[4, 6], lease_ttls=["500ms", "5s"],
        arrivals=["poisson(8/s)"],
        set_fields={**parameters["set_fields"], "faults.crash.rate": "3/m"})
    table = leases.planner_table(read_results(results_dir_for(sweep, tmp_path / "results")),
                                 sweep)
    assert sorted(set(table[leases.LIMIT])) == [4, 6]
    assert sorted(set(table[leases.TTL])) == [0.5, 5.0]
    targets = leases.RegionTargets.in_average_slots(0.05, 1.0, 0.0, run_seconds=12.0)
    expected = leases.region_line(leases.recommend_region(table, targets))
    assert expected in printed_by(notebook).splitlines()

    texts = [output["data"].get("text/markdown", "")
             for output in outputs_of(notebook, "display_data")]
    assert any("Erlang-B" in text and "standard errors" in text for text in texts)
    assert any("Recommended (max_in_flight, lease TTL)" in text
               or "No tested (max_in_flight, lease TTL) pair meets every target" in text
               for text in texts)
