"""Notebook 01 (cap overshoot under faults) runs end to end on tiny sweeps
and draws every figure."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, printed_by

NAME = "01_cap_overshoot_under_faults"
FIGURES = 4  # headline, causes (fleet-wide stores), per-replica store, false denials


def small_parameters(tmp_path: Path) -> dict:
    """Every store, fail open only, two rates per fault axis, one seed, two
    virtual seconds of 20 replicas: ten short runs in five sweeps."""
    return {
        "stores": ["axond_budget.redis_v1", "axond_budget.redis_v2",
                   "axond_budget.in_memory"],
        "seeds": 1,
        "set_fields": {
            "duration": "2s", "drain": "2s", "fleet.replicas": 20,
            "workload.arrivals": "poisson(100/s)",
            "store_settings.subject_cap_microdollars": 30_000,
        },
        "vary": {
            "faults.crash.rate": ["0/h", "120/h"],
            "network.reply_loss": [0.0, 0.1],
            "store_settings.on_unavailable": ["allow"],
        },
        "results_dir": str(tmp_path / "results"),
        "workers": 2,
    }


def test_the_notebook_draws_every_figure_on_small_sweeps(tmp_path: Path):
    notebook = execute_notebook(NAME, small_parameters(tmp_path), tmp_path)
    images = figures_of(notebook)
    assert len(images) == FIGURES
    printed = printed_by(notebook)
    # The conclusions are computed, one per store, policy and fault axis.
    for store in ("Redis v1", "Redis v2"):
        assert f"{store}, fail open (allow), reply-loss rate 0 → 0.1" in printed
    assert "in-memory (per replica), replica crash rate 0/h → 120/h" in printed
    # Each store's sweeps kept their runs in folders of their own under results_dir.
    assert len(list((tmp_path / "results").glob("overshoot-vs-faults-*/results.parquet"))) == 5
