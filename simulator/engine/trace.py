"""The run's event trace: every event, in order, and a fingerprint of them.

Rules kept here:

* One row per event, appended in the order the kernel ran them; columns are
  kept as lists (cheap to append, written to Parquet in one go), and a row
  is never an object of its own: ``record`` appends to each column.
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
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

COLUMNS = ("time_us", "replica", "incarnation", "request", "kind", "namespace", "subject",
           "amount", "outcome", "detail")
"""A row's columns, in order (``schema()`` gives their Parquet types)."""


@cache
def schema() -> pa.Schema:
    """The trace's Parquet schema. Built on first use: pyarrow is imported only
    by what reads or writes a trace (``check`` and ``--help`` start without it)."""
    import pyarrow as pa
    return pa.schema(
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

FINGERPRINT_CHUNK = 65_536
"""Rows hashed per digest update: bounds the text built at once."""


class Trace:
    """Columns of events plus their fingerprint."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in COLUMNS}
        self._hash = hashlib.blake2b(digest_size=16)
        self._hashed = 0
        # One list per column, bound once: a row is ten appends, no object of its own.
        (self._time_us, self._replica, self._incarnation, self._request, self._kind,
         self._namespace, self._subject, self._amount, self._outcome,
         self._detail) = self.columns.values()

    def record(self, time_us: int, replica: int, incarnation: int, request: int, kind: str,
               namespace: str = "", subject: str = "", amount: int = 0,
               outcome: str | None = "", detail: str = "") -> int:
        """Append a row; return its index. ``outcome=UNKNOWN_YET`` leaves the
        outcome to be filled in by ``set_outcome``."""
        self._time_us.append(time_us)
        self._replica.append(replica)
        self._incarnation.append(incarnation)
        self._request.append(request)
        self._kind.append(kind)
        self._namespace.append(namespace)
        self._subject.append(subject)
        self._amount.append(amount)
        self._outcome.append(outcome)
        self._detail.append(detail)
        return len(self._time_us) - 1

    def set_outcome(self, index: int, outcome: str) -> None:
        self._outcome[index] = outcome

    def __len__(self) -> int:
        return len(self._time_us)

    @property
    def fingerprint(self) -> str:
        start, end = self._hashed, len(self)
        pending = self._outcome[start:end]
        if UNKNOWN_YET in pending:
            index = start + pending.index(UNKNOWN_YET)
            raise RuntimeError(f"trace row {index} ({self._kind[index]}) still awaits its "
                               "outcome: flush the server before reading the trace")
        # The digest of each row's repr in order, fed in chunks (the same bytes
        # as row by row): zip builds the rows in C, not one Python tuple at a time.
        columns = [column[start:end] for column in self.columns.values()]
        for offset in range(0, end - start, FINGERPRINT_CHUNK):
            rows = zip(*(column[offset:offset + FINGERPRINT_CHUNK] for column in columns),
                       strict=True)
            self._hash.update("".join(map(repr, rows)).encode())
        self._hashed = end
        return self._hash.hexdigest()

    def to_table(self) -> pa.Table:
        import pyarrow as pa
        return pa.Table.from_pydict(
            {
                field.name: pa.array(self.columns[field.name], type=field.type.value_type)
                .dictionary_encode()
                if pa.types.is_dictionary(field.type)
                else pa.array(self.columns[field.name], type=field.type)
                for field in schema()
            },
        )

    def write_parquet(self, path: Path) -> None:
        import pyarrow.parquet as pq
        pq.write_table(self.to_table(), path, compression="zstd")


def fingerprint_of(table: pa.Table) -> str:
    """The fingerprint of a trace read back from Parquet (for replay checks)."""
    digest = hashlib.blake2b(digest_size=16)
    for row in zip(*(table.column(name).to_pylist() for name in COLUMNS), strict=True):
        digest.update(repr(row).encode())
    return digest.hexdigest()
