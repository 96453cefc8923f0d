"""``clean`` (issue 25): what killed runs left, found by the marks the lab
writes and removed; look-alikes of a user's (keys, a library, schemas named
as the lab names them, but unmarked) are never touched, nor a run still
running."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from simulator.backends import BackendSpec, open_redis_backend, run_marks
from simulator.cli import USER_ERROR, main

REPO = Path(__file__).resolve().parents[2]


def dead_pid() -> int:
    """A process id that is no longer anybody's."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def killed_run(url: str) -> str:
    """A run's keys, library and mark on the server, as a run killed outright leaves them."""
    backend = open_redis_backend(BackendSpec.parse(url))
    token = backend.namespace.removeprefix("lab:").removesuffix(":")
    backend.client.set(f"{backend.namespace}axond:budget:{{ns}}:spent", 5)
    backend.client.hset(f"lab:{token}", "pid", dead_pid())  # its process is gone
    backend.client.close()  # not backend.close(): killed, nothing cleaned
    return token


def test_clean_removes_a_killed_run_and_nothing_else(redis_url, capsys):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    token = killed_run(redis_url)
    # A user's look-alikes: keys and a hash named like the lab's, a library named so.
    look_alikes = {"lab:aaaaaaaaaaaa": "user", "lab:aaaaaaaaaaaa:x": "user", "lab:notes": "u"}
    client.mset(look_alikes)
    client.hset("lab:bbbbbbbbbbbb", mapping={"owner": "a user"})
    client.execute_command("FUNCTION", "LOAD", "REPLACE",
                           "#!lua name=lab_cccccccccccc\n"
                           "redis.register_function('user_fn', function() return 1 end)")
    assert client.exists(f"lab:{token}", f"lab:{token}:axond:budget:{{ns}}:spent") == 2
    assert main(["clean", "--backend", redis_url, "--dry-run"]) == 0
    assert f"would remove run {token} (its process" in capsys.readouterr().out
    assert client.exists(f"lab:{token}:axond:budget:{{ns}}:spent")
    assert main(["clean", "--backend", redis_url]) == 0
    printed = capsys.readouterr().out
    assert f"removed run {token} (its process" in printed
    assert f"1 key(s) and the library lab_{token}" in printed
    assert not client.exists(f"lab:{token}", f"lab:{token}:axond:budget:{{ns}}:spent")
    assert not client.function_list(library=f"lab_{token}")
    assert all(client.get(key) == value for key, value in look_alikes.items())
    assert client.hgetall("lab:bbbbbbbbbbbb") == {"owner": "a user"}
    assert client.function_list(library="lab_cccccccccccc")
    client.function_delete("lab_cccccccccccc")
    client.delete(*look_alikes, "lab:bbbbbbbbbbbb")


def test_a_run_still_running_is_kept_unless_older_than_asked(redis_url, capsys):
    backend = open_redis_backend(BackendSpec.parse(redis_url))  # this process: alive
    token = backend.namespace.removeprefix("lab:").removesuffix(":")
    try:
        assert main(["clean", "--backend", redis_url]) == 0
        assert f"kept run {token}: started" in capsys.readouterr().out
        assert backend.client.exists(f"lab:{token}")
        backend.client.hset(f"lab:{token}", "started", round(time.time()) - 7200)
        assert main(["clean", "--backend", redis_url, "--older-than", "1h", "--dry-run"]) == 0
        assert f"would remove run {token} (started 2.0h ago)" in capsys.readouterr().out
    finally:
        backend.close()
    assert not backend.client.exists(f"lab:{token}")  # a normal end removes its mark too


def test_clean_refuses_a_server_not_on_loopback(capsys):
    assert main(["clean", "--backend", "redis://192.0.2.1:6379/0"]) == USER_ERROR
    assert "loopback" in capsys.readouterr().err


def test_clean_removes_a_killed_run_s_schema_and_no_unmarked_one(postgres_server, capsys):
    import asyncpg

    url = postgres_server.dsn

    async def setup() -> None:
        connection = await asyncpg.connect(url)
        try:
            for schema in ("lab_run_killed000000", "lab_run_unmarked0000"):
                await connection.execute(f"CREATE SCHEMA {schema}")
                await connection.execute(f"CREATE TABLE {schema}.ledger (layout text)")
            await run_marks.mark_schema(connection, "lab_run_killed000000")
            await connection.execute(
                "COMMENT ON SCHEMA lab_run_killed000000 IS "
                f"'lab run {{\"started\": 0, \"host\": \"{socket.gethostname()}\", "
                f"\"pid\": {dead_pid()}}}'")
        finally:
            await connection.close()

    async def schemas() -> set[str]:
        connection = await asyncpg.connect(url)
        try:
            rows = await connection.fetch("SELECT nspname FROM pg_namespace WHERE nspname "
                                          "LIKE 'lab_run_%'")
            return {row["nspname"] for row in rows}
        finally:
            await connection.close()

    asyncio.run(setup())
    assert main(["clean", "--backend", url]) == 0
    assert "removed schema lab_run_killed000000 (its process" in capsys.readouterr().out
    left = asyncio.run(schemas())
    assert "lab_run_killed000000" not in left and "lab_run_unmarked0000" in left


def test_the_temp_directory_s_leftovers_go_unless_a_live_process_uses_them(tmp_path):
    gone = tmp_path / "lab-redis-gone"
    used = tmp_path / "lab-postgres-used"
    other = tmp_path / "not-the-labs"
    for directory in (gone, used, other):
        directory.mkdir()
    lines = run_marks.temp_leftovers(False, root=tmp_path,
                                     processes=[f"postgres -D {used}/data"])
    assert lines == [f"kept {used}: a live process uses it", f"removed {gone}"]
    assert not gone.exists() and used.exists() and other.exists()


def test_a_marked_pymp_directory_goes_once_its_process_is_gone(tmp_path):
    gone = tmp_path / "pymp-gone"
    live = tmp_path / "pymp-live"
    unmarked = tmp_path / "pymp-other"
    for directory, pid in ((gone, dead_pid()), (live, os.getpid()), (unmarked, None)):
        directory.mkdir()
        if pid is not None:
            mark = {**run_marks.mark_now(), "pid": pid}
            (directory / run_marks.PROCESS_TEMP_MARK).write_text(json.dumps(mark))
    lines = run_marks.temp_leftovers(False, root=tmp_path, processes=[])
    assert lines[0] == f"removed {gone}"
    assert lines[1].startswith(f"kept {live}: started ") and len(lines) == 2
    assert not gone.exists() and live.exists() and unmarked.exists()


def test_the_lab_s_parallel_commands_mark_their_pymp_directory():
    import multiprocessing.util

    from simulator.sweeps.lifeline import Lifeline

    with Lifeline():
        directory = Path(multiprocessing.util.get_temp_dir())
        mark = json.loads((directory / run_marks.PROCESS_TEMP_MARK).read_text())
    assert directory.name.startswith("pymp-") and mark["pid"] == os.getpid()


def test_a_live_throwaway_server_s_directory_is_kept_by_clean(redis_server):
    """redis-server rewrites its process title; the lab's throwaway server
    names its directory there, so ``clean`` sees it is in use."""
    from simulator.backends.run_marks import temp_leftovers
    lines = temp_leftovers(dry_run=True, root=redis_server.directory.parent)
    assert f"kept {redis_server.directory}: a live process uses it" in lines
