"""A long job's journal: what it set out to do, and each item as it is done.

A campaign (``mutate``) or a rediscovery judges items one by one for an hour
or a night; a kill must not lose what was judged. The journal is a JSON Lines
file: its first line says what the job is (``job``: the command's options, the
scenario's text, the items' names), each later line is one item's record,
appended, flushed and synced as the item is judged. ``resume`` reads it back:
the job it describes, and the records of every item already done, so the job
goes on from there and ends with the table an uninterrupted run would.

A line cut short by a kill mid-write is the only damage a journal can take:
it is dropped (and truncated away), and that item is judged again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOURNAL = "journal.jsonl"


@dataclass
class Journal:
    """An open journal: the job it describes and the records kept so far."""

    path: Path
    job: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, directory: Path, job: dict[str, Any]) -> Journal:
        """A new journal for ``job`` in ``directory``, replacing any there."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / JOURNAL
        with open(path, "w", encoding="utf-8") as file:
            _write(file, {"job": job})
        return cls(path, job)

    @classmethod
    def resume(cls, directory: Path, command: str) -> Journal:
        """The journal a ``command`` left in ``directory``, to go on from;
        one clear line when there is none to resume."""
        path = directory / JOURNAL
        if not path.is_file():
            raise ValueError(f"--resume: {directory} holds no {command} journal ({JOURNAL}); "
                             f"give the directory a {command} wrote its results to")
        # Every line but what follows the last newline: a line is whole once
        # its newline is written (the two are written together).
        lines = path.read_bytes().split(b"\n")[:-1]
        kept, records = 0, []
        head: dict[str, Any] | None = None
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                break  # not JSON: the file was damaged otherwise; go on from before it
            if head is None:
                head = entry
            else:
                records.append(entry)
            kept += len(line) + 1
        job = (head or {}).get("job")
        if not isinstance(job, dict) or job.get("command") != command:
            raise ValueError(f"--resume: {path} is not a {command} journal")
        with open(path, "r+b") as file:
            file.truncate(kept)  # drop a torn last line: its item is judged again
        return cls(path, job, records)

    def append(self, record: dict[str, Any]) -> None:
        """Keep ``record``, on disk before this returns."""
        with open(self.path, "a", encoding="utf-8") as file:
            _write(file, record)
        self.records.append(record)


def _write(file: Any, entry: dict[str, Any]) -> None:
    file.write(json.dumps(entry, sort_keys=True) + "\n")
    file.flush()
    os.fsync(file.fileno())
