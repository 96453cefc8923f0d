"""SIGTERM and Ctrl-C on ``run``, ``replay`` and ``hunt`` (issue 25; ``sweep``:
``test_no_orphans``): one line, exit 143 / 130, and the same cleanup as a
normal end: on a real Redis, the run's keys and its Functions library are
gone; on PostgreSQL, its schema, or the throwaway server and its directory;
a parallel hunt's workers and its ``pymp-*`` directory. Each waits until the
command is under way (its keys, schema or directory exist, or its hunt has
started running schedules), never for a wall-clock time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis
from processes import left_behind

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
UNDER_WAY_WITHIN_S = 120


def started(*command: str, temp: Path | None = None) -> subprocess.Popen:
    """The command, leading a session of its own; ``temp``: its temp directory."""
    environment = None if temp is None else {**os.environ, "TMPDIR": str(temp)}
    # SIGINT as Python starts with it (a test run in the background may inherit it ignored).
    return subprocess.Popen([sys.executable, "-m", "simulator", *command], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_until(under_way, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + UNDER_WAY_WITHIN_S
    while not under_way():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "never under way"
        time.sleep(0.1)


def one_line(process: subprocess.Popen, signum: int) -> str:
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr, stderr
    return stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_run_told_to_stop_says_so_and_leaves_nothing_on_the_server(redis_url, tmp_path,
                                                                    signum):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = client.dbsize()
    out = tmp_path / "out"
    run = started("run", str(SCENARIOS / "demo.toml"), "--backend", redis_url, "--out",
                  str(out), "--quiet", "--set", "duration=600s")
    wait_until(lambda: client.dbsize() > before + 100, run)
    run.send_signal(signum)
    line = one_line(run, signum)
    name = signal.Signals(signum).name
    assert line.startswith(f"run stopped by {name}; the run was at t=")
    assert line.endswith("nothing was written, and it cleaned up")
    assert client.dbsize() == before
    assert not [library for library in client.function_list()
                if str(library.get("library_name", "")).startswith("lab_")]
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_replay_told_to_stop_says_so_and_leaves_nothing_on_the_server(redis_url, tmp_path,
                                                                       signum):
    report = tmp_path / "long.toml"
    original = (REPO / "data" / "races" / "split-settlement-lost-release-reply.toml").read_text()
    report.write_text(original.replace(
        'scenario = "../scenarios/', f'scenario = "{REPO}/data/scenarios/').replace(
        "[variant]\n", '[variant]\n"duration" = "600s"\n'))
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = client.dbsize()
    replay = started("replay", str(report), "--backend", redis_url)
    wait_until(lambda: client.dbsize() > before + 5, replay)  # ten subjects' keys
    replay.send_signal(signum)
    line = one_line(replay, signum)
    assert line.startswith(f"replay stopped by {signal.Signals(signum).name}"), line
    assert client.dbsize() == before
    assert not [library for library in client.function_list()
                if str(library.get("library_name", "")).startswith("lab_")]


def schemas(dsn: str) -> list[str]:
    import asyncio

    import asyncpg

    async def listed() -> list[str]:
        connection = await asyncpg.connect(dsn)
        try:
            return [row[0] for row in await connection.fetch(
                "SELECT schema_name FROM information_schema.schemata "
                "WHERE schema_name LIKE 'lab_run_%'")]
        finally:
            await connection.close()

    return asyncio.run(listed())


def test_a_run_on_postgresql_told_to_stop_drops_its_schema(postgres_server, tmp_path):
    before = schemas(postgres_server.dsn)
    run = started("run", str(SCENARIOS / "tollgate.toml"), "--backend", postgres_server.dsn,
                  "--out", str(tmp_path / "out"), "--quiet", "--set", "duration=600s")
    wait_until(lambda: len(schemas(postgres_server.dsn)) > len(before), run)
    run.send_signal(signal.SIGTERM)
    assert one_line(run, signal.SIGTERM).endswith("nothing was written, and it cleaned up")
    assert schemas(postgres_server.dsn) == before


@pytest.fixture
def temp():
    """A temp directory of the command's own that the throwaway server's
    unprivileged user can reach (pytest's ``tmp_path`` is private to root)."""
    directory = Path(tempfile.mkdtemp(prefix="lab-test-temp-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_run_on_a_throwaway_postgresql_told_to_stop_removes_the_server(postgres_server,
                                                                        tmp_path, temp):
    run = started("run", str(SCENARIOS / "tollgate.toml"), "--backend", "postgresql", "--out",
                  str(tmp_path / "out"), "--quiet", "--set", "duration=600s", temp=temp)
    wait_until(lambda: _throwaway_ledger_open(temp, postgres_server.user), run)
    run.send_signal(signal.SIGTERM)
    assert one_line(run, signal.SIGTERM).endswith("nothing was written, and it cleaned up")
    assert list(temp.iterdir()) == []
    assert left_behind(run.pid) == {}


def _throwaway_ledger_open(temp: Path, user: str) -> bool:
    """Whether the throwaway server in ``temp`` is up and holds the run's schema."""
    for pid_file in temp.glob("lab-postgres-*/data/postmaster.pid"):
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            return False
        if len(lines) >= 8 and lines[7].strip() == "ready":
            return bool(schemas(f"postgresql://{user}@127.0.0.1:{lines[3].strip()}/postgres"))
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_hunt_told_to_stop_says_so_in_one_line(tmp_path, temp, signum):
    hunt = started("hunt", str(SCENARIOS / "hunt" / "split-settlement-quiet.toml"), "--invariant",
                   "conservation_drift_microdollars_total < -100000000", "--examples", "50000",
                   "--workers", "2", "--verbose", "--out", str(tmp_path / "out"), temp=temp)
    lines: list[str] = []

    def running() -> bool:
        # Its first schedule's line is out: the hunt is in its search.
        line = hunt.stderr.readline()
        lines.append(line)
        return "run 1" in line or "search" in line

    wait_until(running, hunt)
    hunt.send_signal(signum)
    _, rest = hunt.communicate(timeout=60)
    assert hunt.returncode == 128 + signum, "".join(lines) + rest
    assert "Traceback" not in rest
    assert rest.strip().splitlines()[-1] == f"hunt stopped by {signal.Signals(signum).name}"
    # Its workers, forkserver and resource tracker went with it, and their directory.
    assert left_behind(hunt.pid) == {}
    assert list(temp.iterdir()) == []


def _journalled(journal: Path, records: int) -> bool:
    """Whether ``journal`` holds at least ``records`` judged items."""
    return journal.exists() and len(journal.read_text().splitlines()) > records


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_campaign_told_to_stop_says_how_to_go_on_and_leaves_no_process(tmp_path, temp,
                                                                        signum):
    out = tmp_path / "out"
    campaign = started("mutate", str(SCENARIOS / "hunt" / "axond-leases.toml"), "--code", "lua",
                       "--schedules", "3", "--workers", "2", "--out", str(out), temp=temp)
    wait_until(lambda: _journalled(out / "journal.jsonl", 1), campaign)
    campaign.send_signal(signum)
    line = one_line(campaign, signum)
    assert line.startswith(f"mutate stopped by {signal.Signals(signum).name}; "), line
    assert line.endswith(f"go on with mutate --resume {out}"), line
    assert left_behind(campaign.pid) == {}
    assert list(temp.iterdir()) == []


def test_a_rediscovery_told_to_stop_says_how_to_go_on_and_leaves_no_process(tmp_path, temp):
    out = tmp_path / "out"
    bench = started("bench", "--rediscovery", "axond_leases", "--workers", "2", "--out",
                    str(out), temp=temp)
    wait_until(lambda: _journalled(out / "journal.jsonl", 1), bench)
    bench.send_signal(signal.SIGTERM)
    line = one_line(bench, signal.SIGTERM)
    assert line.startswith("bench stopped by SIGTERM; "), line
    assert line.endswith(f"go on with bench --resume {out}"), line
    assert left_behind(bench.pid) == {}
    assert list(temp.iterdir()) == []
