"""Notebook 04 (the race-report gallery) runs end to end on two reports."""

from __future__ import annotations

from notebook_runner import execute_notebook, figures_of, outputs_of, tables_of

# The full gallery replays all four reports twice (eight runs, ~25 s of CPU on
# an idle 2-core machine, before drawing): too slow for the suite, so the
# fastest report, its two replays in two worker processes (the parallel path).
SMALL_REPORTS = ["claim-without-slot-loses-spend"]


def test_the_gallery_shows_one_figure_and_both_verdicts_per_report(tmp_path):
    parameters = {"reports": SMALL_REPORTS, "results_dir": str(tmp_path / "gallery"),
                  "workers": 1}
    notebook = execute_notebook("04_race_report_gallery", parameters, tmp_path)
    figures = figures_of(notebook)
    shown = outputs_of(notebook, "display_data")
    assert len(figures) == len(SMALL_REPORTS)
    markdown = "\n".join(output["data"]["text/markdown"] for output in shown
                         if "text/markdown" in output["data"])
    for name in SMALL_REPORTS:
        assert f"Report `{name}`" in markdown
    assert markdown.count("**REPRODUCED:") == len(SMALL_REPORTS)
    assert markdown.count("**HOLDS:") == len(SMALL_REPORTS)
    tables = tables_of(notebook)
    assert len(tables) == 1 and all(name in tables[0] for name in SMALL_REPORTS)
    for name in SMALL_REPORTS:
        assert (tmp_path / "gallery" / f"{name}.variant.png").exists()
        assert (tmp_path / "gallery" / f"{name}.fixed.png").exists()
