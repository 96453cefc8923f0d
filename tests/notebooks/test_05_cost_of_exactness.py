"""Notebook 05 (the cost of exactness) runs end to end on a tiny grid."""

from __future__ import annotations

from notebook_runner import execute_notebook, figures_of, outputs_of, printed_by, tables_of

# Two stores x two durations x one seed, a second of arrivals on 5 replicas,
# on fakeredis (the real-Redis path is tested in tests/analysis/test_exactness.py).
SMALL_PARAMETERS = {
    "durations": ["10ms", "200ms"],
    "seeds": 1,
    "set_fields": {"duration": "1s", "drain": "300ms", "fleet.replicas": 5,
                   "workload.arrivals": "poisson(150/s)", "metrics.sample_every": "100ms"},
    "backend": "fakeredis",
    "saturation_durations": [1.0],
    "workers": 1,
}


def test_the_notebook_draws_both_figures_and_its_tables(tmp_path):
    parameters = {**SMALL_PARAMETERS, "results_dir": str(tmp_path / "results")}
    notebook = execute_notebook("05_cost_of_exactness", parameters, tmp_path)
    figures = figures_of(notebook)
    shown = outputs_of(notebook, "display_data")
    assert len(figures) == 2
    markdown = "\n".join(output["data"]["text/markdown"] for output in shown
                         if "text/markdown" in output["data"])
    assert "Runs on **fakeredis**" in markdown
    assert "per hold in flight" in markdown
    tables = tables_of(notebook)
    assert len(tables) == 2  # the per-point table and the saturation table
    printed = printed_by(notebook)
    assert "every request of every run was admitted" in printed
    assert (tmp_path / "results" / "runs.parquet").exists()
