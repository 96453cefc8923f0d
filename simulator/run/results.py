"""A run's results directory, written whole or not at all.

``run --out DIR`` writes ``summary.json``, ``run_info.json``, the trace and
the metric series (and, when asked, ``reference.json`` and
``counterfactual.json``). They are written first into a fresh directory
beside ``DIR`` and moved into it only once every one of them is written, so
a full disk or a failed write leaves the previous results in ``DIR`` as they
were (the error names the file), and an older run's files this run does not
write (a series when this run samples none) are removed rather than kept and
listed as this run's. Only the lab's own file names are touched in ``DIR``:
anything else a user keeps there stays. ``probe`` refuses an unwritable or
full directory before the simulation starts.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULT_FILES = ("summary.json", "run_info.json", "trace.parquet", "metrics.parquet",
                "reference.json", "counterfactual.json")
"""Every file a run may write into its results directory."""
MIN_FREE_BYTES = 16 * 2**20
"""Free space below which a results directory is refused before the run."""
BYTES_PER_TRACE_ROW = 16
"""About what a trace row takes on disk, compressed (measured: 5 to 12)."""


class ResultsNotWritten(OSError):
    """A result file could not be written; the previous results are intact."""


def probe(out: Path, trace_rows: int = 0) -> None:
    """Refuse ``out`` before anything runs: not a directory the lab can create
    and write in, or on a disk without room for the results (``trace_rows``
    the run's trace, estimated)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file; give a directory for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".lab-probe-"):
            pass
    except OSError as error:
        raise ValueError(f"--out: cannot write in {out}: {error.strerror or error}") from None
    needed = MIN_FREE_BYTES + trace_rows * BYTES_PER_TRACE_ROW
    free = shutil.disk_usage(out).free
    if free < needed:
        raise ValueError(f"--out: {out} is on a disk with {free / 2**20:.1f} MiB free; the "
                         f"results need about {needed / 2**20:.1f} MiB")


def write_results(out: Path, writers: Mapping[str, Callable[[Path], None]]) -> list[Path]:
    """Write each of ``writers`` (a result file's name, and what writes it to a
    path) and move them into ``out`` together; return the files now there."""
    unknown = set(writers) - set(RESULT_FILES)
    assert not unknown, f"not a result file: {unknown}"
    out.mkdir(parents=True, exist_ok=True)
    with _staging(out) as staging:
        for name, write in writers.items():
            try:
                write(staging / name)
            except OSError as error:
                raise ResultsNotWritten(
                    f"could not write {out / name}: {error.strerror or error}; the previous "
                    f"results in {out} are as they were") from None
        for name in RESULT_FILES:
            if name not in writers:
                (out / name).unlink(missing_ok=True)  # an older run's, not this one's
        for name in writers:
            os.replace(staging / name, out / name)
    return [out / name for name in RESULT_FILES if name in writers]


def rows_table(rows: list[dict[str, Any]]) -> Any:
    """A pyarrow table of ``rows`` with every column any row has (absent: null).
    pyarrow alone takes the columns of the first row and drops the rest: a
    metric that appears only as it happens (a refusal kind, an exposure, an
    inconclusive run's reason) would vanish from a sweep's results."""
    import pyarrow as pa
    columns = list(dict.fromkeys(name for row in rows for name in row))
    return pa.Table.from_pylist([{name: row.get(name) for name in columns} for row in rows])


def json_writer(value: Any) -> Callable[[Path], None]:
    """Writes ``value`` as indented JSON."""
    return lambda path: path.write_text(json.dumps(value, indent=2) + "\n")


@contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A fresh directory beside ``out`` (on its disk, so moves are renames),
    removed afterwards whatever happened."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.writing-", dir=out.parent))
    except OSError:  # a parent the lab may not write in: stage inside ``out``
        staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=out))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
