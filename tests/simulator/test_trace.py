"""The trace's fingerprint: a digest of every row's repr, in order, however
often it is read and however the rows were appended."""

from __future__ import annotations

import hashlib

import pytest

from simulator.engine import trace as trace_module
from simulator.engine.trace import UNKNOWN_YET, Trace, fingerprint_of


def row_by_row(trace: Trace) -> str:
    """The fingerprint's definition, one row tuple at a time."""
    digest = hashlib.blake2b(digest_size=16)
    columns = list(trace.columns.values())
    for index in range(len(trace)):
        digest.update(repr(tuple(column[index] for column in columns)).encode())
    return digest.hexdigest()


def filled(rows: int) -> Trace:
    trace = Trace()
    for index in range(rows):
        trace.record(index * 7, index % 5 - 1, index % 3, index, "call_executed",
                     "ns", f"s{index % 11}", index * 13, "ok" if index % 4 else "error:x",
                     "reserve" if index % 2 else "")
    return trace


def test_the_fingerprint_is_the_digest_of_each_rows_repr_in_order(monkeypatch):
    monkeypatch.setattr(trace_module, "FINGERPRINT_CHUNK", 7)  # several chunks
    trace = filled(50)
    assert trace.fingerprint == row_by_row(trace)


def test_reading_the_fingerprint_midway_changes_nothing(monkeypatch):
    monkeypatch.setattr(trace_module, "FINGERPRINT_CHUNK", 4)
    whole, in_parts = filled(30), Trace()
    for index in range(30):
        in_parts.record(*(column[index] for column in whole.columns.values()))
        if index % 9 == 0:
            in_parts.fingerprint  # noqa: B018 - hashes what is there so far
    assert in_parts.fingerprint == whole.fingerprint


def test_a_row_awaiting_its_outcome_cannot_be_fingerprinted():
    trace = filled(3)
    index = trace.record(1, 0, 0, 9, "call_executed", outcome=UNKNOWN_YET)
    with pytest.raises(RuntimeError, match=f"row {index} \\(call_executed\\)"):
        trace.fingerprint  # noqa: B018
    trace.set_outcome(index, "ok")
    assert trace.fingerprint == row_by_row(trace)


def test_the_fingerprint_survives_parquet(tmp_path):
    import pyarrow.parquet as pq

    trace = filled(20)
    trace.write_parquet(tmp_path / "t.parquet")
    assert fingerprint_of(pq.read_table(tmp_path / "t.parquet")) == trace.fingerprint
