"""The session-counter notebook runs end to end on three tiny sweeps, writes
its figures as PNGs and prints what the analysis computes from its runs."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, printed_by

from simulator.analysis import sessions
from simulator.sweeps import read_metrics, read_results, results_dir_for

NAME = "07_session_counters"
FIGURES = ("retries-vs-reply-loss", "twin-vs-redis", "cleanup-race-over-time")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SET_FIELDS = {"duration": "2h", "fleet.replicas": 4}


def small_parameters(tmp_path: Path) -> dict:
    """Two seeds, two values of each varied field, four replicas opening about
    two dozen sessions in two virtual hours: seconds of work per run."""
    return {
        "seeds": 2,
        "reply_losses": [0.0, 0.2],
        "driver_retries": [0, 10],
        "lifetimes": ["uniform(1h, 6h)", "uniform(24h, 60h)"],
        "cleanup_afters": ["0s", "1h"],
        "set_fields": SET_FIELDS,
        "results_dir": str(tmp_path / "results"),
        "workers": 2,
    }


def table_of(sweep_file: str, root: Path, **values) -> tuple[object, object]:
    """The session table the notebook's runs of one sweep give, and its folder."""
    sweep = sessions.load_session_sweep(sweep_file, seeds=2, set_fields=SET_FIELDS, **values)
    out = results_dir_for(sweep, root)
    return sessions.session_table(read_results(out), sweep), out


def test_the_notebook_writes_its_figures_and_prints_what_its_runs_give(tmp_path: Path):
    parameters = small_parameters(tmp_path)
    notebook = execute_notebook(NAME, parameters, tmp_path)
    assert len(figures_of(notebook)) == len(FIGURES)
    root = tmp_path / "results"
    for name in FIGURES:
        assert (root / "figures" / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name
    printed = printed_by(notebook).splitlines()

    # Every line it printed is what the tested analysis gives for its runs.
    retries, _ = table_of("data/sweeps/session-counters-retries.toml", root,
                          reply_losses=[0.0, 0.2], driver_retries=[0, 10])
    assert sorted(set(retries[sessions.REPLY_LOSS])) == [0.0, 0.2]
    assert sorted(set(retries[sessions.DRIVER_RETRIES])) == [0, 10]
    retry_lines = sessions.retry_lines(sessions.retry_findings(retries))
    assert len(retry_lines) == 2 * len(sessions.RETRY_METRICS)   # two stores
    twin, _ = table_of("data/sweeps/session-counters-twin.toml", root,
                       lifetimes=parameters["lifetimes"])
    twin_lines = sessions.twin_lines(sessions.twin_comparison(twin))
    cleanup, out = table_of("data/sweeps/session-counters-cleanup.toml", root,
                            cleanup_afters=["0s", "1h"])
    race = sessions.race_series(read_metrics(out), cleanup)
    race_lines = sessions.race_lines(sessions.race_findings(race))
    assert len(race_lines) == 2 * 2                              # stores × cleanup delays
    for line in (*retry_lines, *twin_lines, *race_lines):
        assert line in printed, line

    # The fixed store mints nothing, whatever the loss and the retries.
    assert "av_state.redis: budget minted (units): none in any of 8 runs" in printed
