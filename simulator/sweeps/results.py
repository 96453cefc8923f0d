"""A sweep's results directory: what is done, written so that nothing is lost.

Layout of ``OUT/``::

    sweep.json                the sweep: its name, base fingerprint, parameters, points
    runs/POINT-seedN.parquet  one row per finished run: parameters + every summary metric
    metrics/POINT-seedN.parquet   that run's metric time series (metrics.parquet)
    results.parquet           every run of the sweep, one row each (rewritten at the end)

Rules kept here:

* A run is done when its row file exists. Files are written to a temporary
  name and renamed into place (atomic on POSIX), metrics before the row, so a
  sweep killed at any instant leaves whole files only, and a re-run redoes
  exactly the runs without a row. A run's file name is its point and seed, so
  no run can be recorded twice.
* Only the process driving the sweep writes here: workers return their results
  instead, so a Dask cluster needs no shared filesystem.
* A directory belongs to one base scenario, backend and version of the lab's
  code: results of another are refused, never mixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from simulator.run.results import rows_table
from simulator.scenario.model import ScenarioError
from simulator.sweeps.design import Sweep, Task, numeric_columns

RESULTS_FILE = "results.parquet"


class ResultsDir:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.metrics = self.root / "metrics"

    def claim(self, sweep: Sweep) -> None:
        """Make the directory this sweep's, or refuse one holding another sweep's results."""
        if self.root.exists() and not self.root.is_dir():
            raise ScenarioError(f"{self.root} is a file; give a directory for the sweep's "
                                "results (--out)")
        manifest = self.root / "sweep.json"
        recorded = json.loads(manifest.read_text()) if manifest.exists() else {}
        if recorded and recorded.get("fingerprint") != sweep.fingerprint:
            raise ScenarioError(
                f"{self.root} holds results of sweep {recorded.get('name')!r} run on a "
                "different base scenario, backend or version of the lab; they cannot be "
                "mixed. Choose another --out, or remove that directory to start again.")
        self.runs.mkdir(parents=True, exist_ok=True)
        self.metrics.mkdir(parents=True, exist_ok=True)
        points = {**recorded.get("points", {}),
                  **{point.point_id: point.parameters for point in sweep.points}}
        _write_atomically(manifest, (json.dumps({
            "name": sweep.name, "fingerprint": sweep.fingerprint,
            "parameters": list(sweep.parameters), "seeds": list(sweep.seeds),
            "points": points}, indent=2) + "\n").encode())

    def is_done(self, task: Task) -> bool:
        return (self.runs / f"{task.run_id}.parquet").exists()

    def record(self, task: Task, summary: dict[str, Any], run_info: dict[str, Any],
               metric_rows: list[dict[str, Any]]) -> None:
        """Keep one finished run: its metric series, then its row (which marks it done)."""
        if metric_rows:
            key = {"point": task.point.point_id, "seed": task.seed}
            table = rows_table([{**key, **row} for row in metric_rows])
            _write_table(table, self.metrics / f"{task.run_id}.parquet")
        _write_table(pa.Table.from_pylist([row_of(task, summary, run_info)]),
                     self.runs / f"{task.run_id}.parquet")

    def consolidate(self, tasks: list[Task]) -> Path:
        """Write ``results.parquet``: the rows of every finished run of ``tasks``."""
        rows = [pq.read_table(path).to_pylist()[0]
                for task in tasks
                if (path := self.runs / f"{task.run_id}.parquet").exists()]
        target = self.root / RESULTS_FILE
        _write_table(rows_table(rows), target)
        return target


def results_dir_for(sweep: Sweep, root: str | Path) -> Path:
    """A results directory under ``root`` for this sweep as it stands:
    ``NAME-FINGERPRINT``, so that a changed base scenario (a notebook's
    parameters, a new version of the lab) starts a fresh directory instead of
    being refused by one holding other results, and the same configuration
    run again reuses its finished runs."""
    return Path(root) / f"{sweep.name}-{sweep.fingerprint}"


def row_of(task: Task, summary: dict[str, Any], run_info: dict[str, Any]) -> dict[str, Any]:
    """A run's row: which point and seed, the varied parameters (durations also in
    seconds, rates also per second, for plotting), every summary metric, and the
    run's wall time."""
    row: dict[str, Any] = {"point": task.point.point_id, "seed": task.seed}
    for path, value in task.point.parameters.items():
        row[path] = value
        row.update(numeric_columns(path, value))
    row.update({name: value for name, value in summary.items() if name not in row})
    row["run_wall_seconds"] = run_info.get("wall_seconds")
    return row


def read_results(out: str | Path) -> pd.DataFrame:
    """Every finished run of the sweep in ``out``, one row each (``point``, ``seed``,
    the parameters, the summary metrics). Reads the run files when the sweep has
    not finished, so partial results can be looked at too."""
    root = Path(out)
    consolidated = root / RESULTS_FILE
    if consolidated.exists():
        return pd.read_parquet(consolidated)
    paths = sorted((root / "runs").glob("*.parquet"))
    if not paths:
        raise FileNotFoundError(f"{root}: no sweep results here yet")
    return pd.DataFrame([pq.read_table(path).to_pylist()[0] for path in paths])


def read_metrics(out: str | Path, points: list[str] | None = None) -> pd.DataFrame:
    """The metric time series of the sweep in ``out`` (of ``points`` only, when
    given), with ``point`` and ``seed`` columns."""
    root = Path(out) / "metrics"
    paths = sorted(root.glob("*.parquet"))
    if points is not None:
        wanted = set(points)
        paths = [path for path in paths if path.name.split("-seed")[0] in wanted]
    if not paths:
        raise FileNotFoundError(f"{root}: no metric series here")
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def _write_table(table: pa.Table, path: Path) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    _write_atomically(path, sink.getvalue().to_pybytes())


def _write_atomically(path: Path, content: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(content)
    os.replace(temporary, path)
