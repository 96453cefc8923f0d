"""``metrics.parquet``: the oracle's metrics as a time series.

A sampler wakes every ``every_us`` of virtual time and copies the oracle's
books: one aggregate row (``namespace == "*"``) and, when asked, one row per
key. It reads nothing from the backend and sends no message, so sampling at
any interval leaves the run — its trace and its summary — exactly as it was.
The oracle's books mirror the store's record exactly (they are updated from
the post-state of every command, and checked against the backend at the end
of the run), so the series is the store's record at each instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.engine.kernel import Kernel
from simulator.plugin.protocol import Oracle


class Sampler:
    def __init__(self, kernel: Kernel, oracle: Oracle, every_us: int, end_us: int,
                 per_key: bool) -> None:
        self.kernel = kernel
        self.oracle = oracle
        self.every_us = every_us
        self.end_us = end_us
        self.per_key = per_key
        self.rows: list[dict[str, Any]] = []

    def start(self) -> None:
        if self.every_us > 0:
            self.kernel.at(0, self._sample)

    def _sample(self) -> None:
        self.rows.extend(self.oracle.sample(self.kernel.now, self.per_key))
        following = self.kernel.now + self.every_us
        if following <= self.end_us:
            self.kernel.at(following, self._sample)

    def write_parquet(self, path: Path) -> None:
        # Imported here: only a run that writes its samples needs pyarrow.
        import pyarrow.parquet as pq

        from simulator.run.results import rows_table
        pq.write_table(rows_table(self.rows), path, compression="zstd")
