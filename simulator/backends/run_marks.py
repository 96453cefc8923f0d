"""What a run leaves on a server it did not start, marked so that it can be
found again, and ``clean`` that finds and removes what killed runs left.

A run on a real Redis keeps its keys under ``lab:<token>:`` and its scripts
in the Functions library ``lab_<token>``; on a PostgreSQL it keeps its ledger
in the schema ``lab_run_<token>``. Each normally goes when the run ends; a run
killed outright (``kill -9``, a machine lost) leaves them. So every such run
first writes a **mark**: the hash ``lab:<token>`` on Redis, a comment on its
schema on PostgreSQL, saying when it started and which process on which host
runs it. ``clean`` removes only what a mark vouches for and whose run is
over: its process gone from this host, or, with ``--older-than``, started
that long ago (a run on another host cannot be seen to be alive). A key, a
library or a schema without the lab's mark is never touched, whatever its
name; a library is the lab's only with a mark *and* the lab's own code (the
virtual-expiry shim), a schema only with a mark *and* the ledger's layout
column. The lab's leftovers in the temp directory go too: throwaway
servers' directories no live process uses, and the ``pymp-*`` directories
of the lab's parallel commands (multiprocessing's, removed at a normal exit)
that hold the lab's mark and whose process is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARK_FIELDS = ("started", "host", "pid")
"""A mark's fields: the run's start (Unix seconds), its host and process id."""
SCHEMA_MARK = "lab run "
"""How the comment on a run's schema begins (the mark's JSON follows)."""
SHIM_SIGNATURE = "local lab_shim = "
"""A line only the lab's own Functions library code holds (``functions_library``)."""
TEMP_PREFIXES = ("lab-redis-", "lab-valkey-", "lab-postgres-")
"""The lab's throwaway servers' directories in the temp directory."""
PROCESS_TEMP_PREFIX = "pymp-"
"""multiprocessing's per-process temp directories (``util.get_temp_dir``)."""
PROCESS_TEMP_MARK = "lab-mark.json"
"""The file that makes a ``pymp-*`` directory the lab's: its process's mark."""


def mark_now() -> dict[str, Any]:
    """This run's mark."""
    return {"started": round(time.time()), "host": socket.gethostname(), "pid": os.getpid()}


@dataclass(frozen=True)
class Mark:
    """A run's mark, read back."""

    started: float
    host: str
    pid: int

    @classmethod
    def parse(cls, fields: dict[str, Any]) -> Mark | None:
        try:
            return cls(float(fields["started"]), str(fields["host"]), int(fields["pid"]))
        except (KeyError, TypeError, ValueError):
            return None

    def over(self, older_than_s: float | None, now: float | None = None) -> str | None:
        """Why its run is over (so what it left may go), or None while it may run."""
        age = (time.time() if now is None else now) - self.started
        if self.host == socket.gethostname() and not _alive(self.pid):
            return f"its process {self.pid} on this host is gone"
        if older_than_s is not None and age >= older_than_s:
            return f"started {_ago(age)} ago"
        return None

    def running(self) -> str:
        where = "this host" if self.host == socket.gethostname() else self.host
        return f"started {_ago(time.time() - self.started)} ago by process {self.pid} on {where}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{max(0, seconds):.0f}s"


# -- Redis -----------------------------------------------------------------


def mark_redis_run(client: Any, token: str) -> None:
    """Write the run's mark (``lab:<token>``) before anything else of it."""
    client.hset(redis_mark_key(token), mapping=mark_now())


def redis_mark_key(token: str) -> str:
    return f"lab:{token}"


def redis_leftovers(client: Any, older_than_s: float | None, dry_run: bool,
                    shim_signature: str) -> list[str]:
    """What killed runs left on a Redis: one line each, removed unless ``dry_run``."""
    lines = []
    for key in sorted(client.scan_iter(match="lab:" + "[0-9a-f]" * 12, count=1000)):
        if client.type(key) != "hash":
            continue
        mark = Mark.parse(client.hgetall(key))
        if mark is None:
            continue  # not a mark of the lab's: a user's key of a like name
        token = key.removeprefix("lab:")
        why = mark.over(older_than_s)
        if why is None:
            lines.append(f"kept run {token}: {mark.running()} (it may still be running; "
                         "--older-than removes it anyway)")
            continue
        keys = list(client.scan_iter(match=f"{key}:*", count=1000))
        library = _run_library(client, token, shim_signature)
        verb = "would remove" if dry_run else "removed"
        what = f"{len(keys)} key(s)" + (f" and the library {library}" if library else "")
        if not dry_run:
            for start in range(0, len(keys), 1000):
                client.delete(*keys[start:start + 1000])
            if library:
                client.execute_command("FUNCTION", "DELETE", library)
            client.delete(key)
        lines.append(f"{verb} run {token} ({why}): {what}")
    return lines


def _run_library(client: Any, token: str, shim_signature: str) -> str | None:
    """The run's library, if the server has it and it holds the lab's own code."""
    name = f"lab_{token}"
    try:
        found = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", name, "WITHCODE")
    except Exception:  # noqa: BLE001 - a server without Functions has no library
        return None
    for library in found or ():
        fields = library if isinstance(library, dict) else dict(zip(library[::2], library[1::2],
                                                                   strict=True))
        if fields.get("library_name") == name and shim_signature in str(
                fields.get("library_code", "")):
            return name
    return None


# -- PostgreSQL ------------------------------------------------------------


async def mark_schema(connection: Any, schema: str) -> None:
    """Write the run's mark as a comment on its schema."""
    mark = SCHEMA_MARK + json.dumps(mark_now())
    await connection.execute(f"COMMENT ON SCHEMA {schema} IS '{mark}'")


async def schema_leftovers(connection: Any, older_than_s: float | None,
                           dry_run: bool) -> list[str]:
    """What killed runs left on a PostgreSQL: one line each, removed unless ``dry_run``."""
    rows = await connection.fetch(
        "SELECT n.nspname AS schema, obj_description(n.oid, 'pg_namespace') AS comment "
        "FROM pg_namespace n WHERE n.nspname LIKE 'lab\\_run\\_%' ORDER BY 1")
    lines = []
    for row in rows:
        comment = row["comment"] or ""
        if not comment.startswith(SCHEMA_MARK):
            continue  # no mark of the lab's: not ours, whatever its name
        try:
            mark = Mark.parse(json.loads(comment.removeprefix(SCHEMA_MARK)))
        except ValueError:
            mark = None
        laid_out = await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
            "table_schema = $1 AND table_name = 'ledger' AND column_name = 'layout')",
            row["schema"])
        if mark is None or not laid_out:
            continue
        why = mark.over(older_than_s)
        if why is None:
            lines.append(f"kept schema {row['schema']}: {mark.running()} (it may still be "
                         "running; --older-than removes it anyway)")
            continue
        if not dry_run:
            await connection.execute(f"DROP SCHEMA {row['schema']} CASCADE")
        lines.append(f"{'would remove' if dry_run else 'removed'} schema {row['schema']} "
                     f"({why})")
    return lines


# -- the temp directory -----------------------------------------------------


def mark_process_temp_dir() -> Path:
    """Mark this process's multiprocessing temp directory (made now if it is
    not yet) as the lab's: a parallel command killed outright leaves it, and
    ``clean`` removes it once this process is gone. Other programs'
    ``pymp-*`` directories carry no mark and are never touched."""
    import multiprocessing.util

    directory = Path(multiprocessing.util.get_temp_dir())
    mark = directory / PROCESS_TEMP_MARK
    if not mark.exists():
        mark.write_text(json.dumps(mark_now()))
    return directory


def _process_temp_mark(directory: Path) -> Mark | None:
    try:
        return Mark.parse(json.loads((directory / PROCESS_TEMP_MARK).read_text()))
    except (OSError, ValueError):
        return None


def temp_leftovers(dry_run: bool, root: Path | None = None,
                   processes: Iterable[str] | None = None) -> list[str]:
    """The lab's leftovers in the temp directory: throwaway servers'
    directories no live process uses, and marked ``pymp-*`` directories of
    processes gone from this host."""
    root = Path(tempfile.gettempdir()) if root is None else root
    commands = list(_command_lines() if processes is None else processes)
    lines = []
    for directory in sorted(root.iterdir()):
        if not directory.is_dir():
            continue
        if directory.name.startswith(PROCESS_TEMP_PREFIX):
            mark = _process_temp_mark(directory)
            if mark is None:
                continue  # another program's, or one of the lab's still being made
            if mark.over(None) is None:
                lines.append(f"kept {directory}: {mark.running()}")
                continue
        elif not directory.name.startswith(TEMP_PREFIXES):
            continue
        elif any(str(directory) in command for command in commands):
            lines.append(f"kept {directory}: a live process uses it")
            continue
        if not dry_run:
            shutil.rmtree(directory, ignore_errors=True)
        lines.append(f"{'would remove' if dry_run else 'removed'} {directory}")
    return lines


def _command_lines() -> Iterable[str]:
    """Every live process's command line (Linux's /proc; none elsewhere)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            yield (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
