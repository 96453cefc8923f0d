"""A throwaway PostgreSQL the lab starts and owns: a fresh cluster in a temp
directory, listening on a free loopback port, stopped (and its directory
removed) when done.

The PostgreSQL counterpart of ``ThrowawayRedis``, for the tests and for users
who have the binaries. Two facts of the platform shape it:

* PostgreSQL refuses to run as root. Run by root, ``initdb``, ``postgres`` and
  ``pg_ctl`` are started as ``nobody`` on a directory that user owns.
* Debian keeps the binaries in ``/usr/lib/postgresql/<version>/bin``, off
  ``PATH``, and its package may start a system cluster of its own: the lab
  never uses that one, only the cluster it created here.

Durability is off (``fsync``, ``synchronous_commit``): the cluster lives as
long as one test session, so a crash of the machine may lose it whole.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from simulator.backends.local_server import free_port

DEBIAN_ROOT = Path("/usr/lib/postgresql")
"""Where Debian installs each major version's binaries, off ``PATH``."""

UNPRIVILEGED_USER = "nobody"
"""Who runs the cluster when the lab runs as root."""

READY_WITHIN_S = 30.0
LOG_TAIL_LINES = 20


@dataclass(frozen=True, slots=True)
class PostgresBinaries:
    """The three programs a throwaway cluster needs, as absolute paths."""

    initdb: str
    postgres: str
    pg_ctl: str


_PROGRAMS = ("initdb", "postgres", "pg_ctl")
MISSING_BINARIES = ("no initdb/postgres/pg_ctl on PATH nor under "
                    f"{DEBIAN_ROOT}/<version>/bin")
"""What to say when ``postgres_binaries`` finds nothing (a skip reason)."""


def _binaries_in(found: dict[str, str | None]) -> PostgresBinaries | None:
    if any(path is None for path in found.values()):
        return None
    return PostgresBinaries(**{name: str(path) for name, path in found.items()})


def _version_key(directory: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", directory.name)) or (-1,)


def postgres_binaries() -> PostgresBinaries | None:
    """``initdb``/``postgres``/``pg_ctl`` from ``PATH``, else from the highest
    Debian version directory holding all three; ``None`` when neither has them."""
    on_path = _binaries_in({name: shutil.which(name) for name in _PROGRAMS})
    if on_path is not None:
        return on_path
    versions = sorted((d for d in DEBIAN_ROOT.glob("*") if (d / "bin").is_dir()),
                      key=_version_key, reverse=True) if DEBIAN_ROOT.is_dir() else []
    for version in versions:
        found = {name: (str(version / "bin" / name)
                        if os.access(version / "bin" / name, os.X_OK) else None)
                 for name in _PROGRAMS}
        binaries = _binaries_in(found)
        if binaries is not None:
            return binaries
    return None


REMOVE_ATTEMPTS = 20
REMOVE_PAUSE_S = 0.05
"""How often, and how far apart, a stopped server's directory removal is tried."""


def setpriv_ties() -> bool:
    """Whether ``setpriv`` can tie a child's life to ours (``--pdeathsig``,
    util-linux 2.33 and later)."""
    if not shutil.which("setpriv"):
        return False
    shown = subprocess.run(["setpriv", "--help"], capture_output=True, text=True, check=False)
    return "--pdeathsig" in shown.stdout


class ThrowawayPostgres:
    """A PostgreSQL cluster the lab owns, so it may do anything to it.

    Started by the constructor (ready to accept connections when it returns),
    stopped by ``stop()`` or on leaving a ``with`` block. ``dsn`` connects as
    the cluster's superuser (the user that ran ``initdb``) over TCP on
    127.0.0.1; the unix socket lives inside the temp directory, so nothing
    lands in ``/var/run/postgresql`` beside a system cluster."""

    def __init__(self, binaries: PostgresBinaries | None = None) -> None:
        found = binaries or postgres_binaries()
        if found is None:
            raise RuntimeError(MISSING_BINARIES)
        self.binaries = found
        self.port = free_port()
        self._as_root = os.geteuid() == 0
        self.user = UNPRIVILEGED_USER if self._as_root else pwd.getpwuid(os.geteuid()).pw_name
        # 0o755 so the unprivileged owner of the data directory can reach it.
        self.directory = Path(tempfile.mkdtemp(prefix="lab-postgres-"))
        self.directory.chmod(0o755)
        self.data = self.directory / "data"
        self.sockets = self.directory / "sockets"
        self.log = self.directory / "postgres.log"
        self.process: subprocess.Popen[bytes] | None = None
        try:
            self._start()
        except BaseException:
            # Stopped first: a signal may land once the postmaster runs, and a
            # server still running writes into the directory being removed.
            self.stop()
            raise

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def __enter__(self) -> ThrowawayPostgres:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def _owned_by_runner(self, *paths: Path) -> None:
        for path in paths:
            path.mkdir(mode=0o700)
            if self._as_root:
                account = pwd.getpwnam(self.user)
                os.chown(path, account.pw_uid, account.pw_gid)

    def _command(self, program: str, *args: str, tied: bool = False) -> list[str]:
        """``program`` with ``args``, dropped to the unprivileged user under root.
        ``setpriv`` execs in place, so the process we hold is the program itself.
        ``tied``: the program gets SIGINT (PostgreSQL's fast shutdown) when the
        lab's process dies, however it dies, so a killed run leaves no server."""
        tie = ["--pdeathsig", "INT"] if tied and setpriv_ties() else []
        if not self._as_root:
            return ["setpriv", *tie, program, *args] if tie else [program, *args]
        account = pwd.getpwnam(self.user)
        if shutil.which("setpriv"):
            return ["setpriv", *tie, f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                    "--clear-groups", program, *args]
        return ["runuser", "-u", self.user, "--", program, *args]

    def _start(self) -> None:
        self._owned_by_runner(self.data, self.sockets)
        with self.log.open("ab") as log:
            initdb = subprocess.run(
                self._command(self.binaries.initdb, "-D", str(self.data), "-U", self.user,
                              "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"),
                stdout=log, stderr=subprocess.STDOUT, cwd=self.directory, check=False)
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb exited with {initdb.returncode}:\n{self.log_tail()}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.sockets),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "16MB",
            "max_connections": "40",
            "logging_collector": "off",
        }
        args = ["-D", str(self.data)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self._command(self.binaries.postgres, *args,
                                                          tied=True),
                                            stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.directory)
        self._wait_until_ready()

    def _ready(self) -> bool:
        """The postmaster says so in its pid file, and the port answers."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        if len(lines) < 8 or lines[7].strip() != "ready":
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}:\n"
                                   f"{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.05)
        self._halt()
        raise RuntimeError(f"postgres did not accept connections within {READY_WITHIN_S:.0f} s:"
                           f"\n{self.log_tail()}")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines the cluster logged, for an error message."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def _halt(self) -> None:
        """Fast shutdown (roll back open transactions, then exit), killing the
        postmaster only if it does not stop in time."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        subprocess.run(self._command(self.binaries.pg_ctl, "stop", "-D", str(self.data),
                                     "-m", "fast", "-w", "-t", "20"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=self.directory, check=False)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _remove(self) -> None:
        """Remove the directory, again if something of the server's was still
        writing into it as it went (a removal that raced it leaves a
        directory the first pass could not empty)."""
        for _ in range(REMOVE_ATTEMPTS):
            shutil.rmtree(self.directory, ignore_errors=True)
            if not self.directory.exists():
                return
            time.sleep(REMOVE_PAUSE_S)

    def stop(self) -> None:
        """Shut the cluster down and remove its directory. Idempotent."""
        self._halt()
        self._remove()
