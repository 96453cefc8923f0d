"""The run's event trace: every event, in order, and a fingerprint of them.

Rules kept here:

* One row per event, appended in the order the kernel ran them; columns are
  kept as lists (cheap to append, written to Parquet in one go).
* The fingerprint is a hash over every row in order, so two runs have the
  same fingerprint exactly when they produced the same events in the same
  order with the same values. A row may be recorded before its outcome is
  known (a command queued in a pipeline) and completed later; rows are hashed
  once complete, in order. Nothing backend-specific (wall time, Redis key
  prefixes, connection details) may enter a row.

Event kinds (``kind`` column):

=======================  ======================================================
request_arrived          a request reached a replica (amount: its estimate)
request_admitted         the store admitted it (outcome: held / unheld)
request_denied           the store denied it (outcome: exceeded / store_unavailable)
work_completed           its upstream work finished (amount: actual spend)
request_settled          the replica's settle call returned (amount: actual)
call_executed            the server executed a command (detail: script or verb)
request_lost             a command was lost on its way to the server
reply_lost               a reply was lost after the command executed
call_retried             the driver re-sent a command after a timeout
call_timed_out           the caller gave up on a command
late_reply               a reply arrived after its call had been given up
reply_to_dead_replica    a reply arrived for a replica that had crashed
key_expired              the server dropped a key whose TTL ran out (virtual time)
replica_started          a replica booted its store
replica_boot_failed      its store refused to boot (detail: why); retried later
=======================  ======================================================
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("time_us", pa.int64()),
        ("replica", pa.int32()),
        ("incarnation", pa.int32()),
        ("request", pa.int64()),
        ("kind", pa.dictionary(pa.int32(), pa.string())),
        ("namespace", pa.dictionary(pa.int32(), pa.string())),
        ("subject", pa.dictionary(pa.int32(), pa.string())),
        ("amount", pa.int64()),
        ("outcome", pa.string()),
        ("detail", pa.dictionary(pa.int32(), pa.string())),
    ]
)
SERVER = -1
"""The ``replica`` of events that happen on the server."""


UNKNOWN_YET = None
"""The outcome of a row whose command has not run yet (see ``set_outcome``)."""


class Trace:
    """Columns of events plus their fingerprint."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {field.name: [] for field in SCHEMA}
        self._hash = hashlib.blake2b(digest_size=16)
        self._hashed = 0
        self._append = [self.columns[field.name].append for field in SCHEMA]

    def record(self, time_us: int, replica: int, incarnation: int, request: int, kind: str,
               namespace: str = "", subject: str = "", amount: int = 0,
               outcome: str | None = "", detail: str = "") -> int:
        """Append a row; return its index. ``outcome=UNKNOWN_YET`` leaves the
        outcome to be filled in by ``set_outcome``."""
        row = (time_us, replica, incarnation, request, kind, namespace, subject, amount,
               outcome, detail)
        for append, value in zip(self._append, row, strict=True):
            append(value)
        return len(self.columns["time_us"]) - 1

    def set_outcome(self, index: int, outcome: str) -> None:
        self.columns["outcome"][index] = outcome

    def __len__(self) -> int:
        return len(self.columns["time_us"])

    @property
    def fingerprint(self) -> str:
        columns = [self.columns[field.name] for field in SCHEMA]
        for index in range(self._hashed, len(self)):
            row = tuple(column[index] for column in columns)
            if row[8] is UNKNOWN_YET:
                raise RuntimeError(f"trace row {index} ({row[4]}) still awaits its outcome: "
                                   "flush the server before reading the trace")
            self._hash.update(repr(row).encode())
        self._hashed = len(self)
        return self._hash.hexdigest()

    def to_table(self) -> pa.Table:
        return pa.Table.from_pydict(
            {
                field.name: pa.array(self.columns[field.name], type=field.type.value_type)
                .dictionary_encode()
                if pa.types.is_dictionary(field.type)
                else pa.array(self.columns[field.name], type=field.type)
                for field in SCHEMA
            },
        )

    def write_parquet(self, path: Path) -> None:
        pq.write_table(self.to_table(), path, compression="zstd")


def fingerprint_of(table: pa.Table) -> str:
    """The fingerprint of a trace read back from Parquet (for replay checks)."""
    digest = hashlib.blake2b(digest_size=16)
    for row in zip(*(table.column(field.name).to_pylist() for field in SCHEMA), strict=True):
        digest.update(repr(row).encode())
    return digest.hexdigest()
