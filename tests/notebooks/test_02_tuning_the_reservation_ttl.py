"""The TTL-tuning notebook runs end to end on a tiny sweep and draws every figure."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, outputs_of

NAME = "02_tuning_the_reservation_ttl"
FIGURES = 5  # duration tail, too short, too long, trade-off, inside one run


def small_parameters(tmp_path: Path) -> dict:
    """Three TTLs, one seed, a few virtual seconds of a small fleet: seconds of work."""
    return {
        "seeds": 1,
        "ttl_range": ["1s", "8s", "1m"],
        "set_fields": {
            "duration": "3s", "drain": "1s", "fleet.replicas": 10,
            "workload.arrivals": "poisson(50/s)",
            "store_settings.subject_cap_microdollars": 40_000,
        },
        "crash_rate": "2/m",
        "results_dir": str(tmp_path / "results"),
        "workers": 2,
    }


def test_the_notebook_draws_every_figure_on_a_small_sweep(tmp_path: Path):
    notebook = execute_notebook(NAME, small_parameters(tmp_path), tmp_path)
    images = figures_of(notebook)
    assert len(images) == FIGURES
    texts = [output["data"].get("text/markdown", "")
             for output in outputs_of(notebook, "display_data")]
    # The conclusion is computed: it either names a range or says there is none.
    assert any("Recommended reservation TTL" in text or "No tested TTL meets both limits"
               in text for text in texts)
    # The runs were kept, in a folder of their own under results_dir.
    assert list((tmp_path / "results").glob("ttl-tuning-*/results.parquet"))
