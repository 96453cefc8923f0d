"""A throwaway ``redis-server`` the lab starts and owns: a free loopback port,
no disk, stopped (and its directory removed) when done.

Used by the tests, by ``bench`` and by notebooks that want real Redis when the
binary is installed. Because the lab started it, the lab may do anything to
it; a server the lab did not start is only ever touched under a run's prefix.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ThrowawayRedis:
    """A ``redis-server`` the tests own, so they may do anything to it."""

    def __init__(self, binary: str) -> None:
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="lab-redis-"))
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory),
             *names_its_directory(binary, self.directory),
             # DEBUG SLEEP, from this machine only: tests make the server hang.
             "--enable-debug-command", "local"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._wait_until_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 10 s")

    def restart(self) -> None:
        """Stop the server at once and start it again, empty, on the same port."""
        self.process.kill()
        self.process.wait()
        self.process = subprocess.Popen(self.process.args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self._wait_until_ready()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def redis_binary() -> str | None:
    return shutil.which("redis-server")


def names_its_directory(binary: str, directory: Path) -> list[str]:
    """Arguments that put ``directory`` in the server's process title, where
    ``clean`` looks for a live process's directory (redis-server rewrites its
    title, so its command line no longer names it): ``proc-title-template``,
    Redis 6.2 and later; none for an older server."""
    if not _titles_by_template(binary):
        return []
    return ["--proc-title-template", f"{{title}} {{listen-addr}} {{server-mode}} {directory}"]


@cache
def _titles_by_template(binary: str) -> bool:
    shown = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"v=(\d+)\.(\d+)", shown.stdout)
    return found is not None and (int(found.group(1)), int(found.group(2))) >= (6, 2)


@contextmanager
def throwaway_redis() -> Iterator[ThrowawayRedis | None]:
    """A server for the duration of a ``with`` block; None when no
    ``redis-server`` is installed (the caller says so and falls back)."""
    binary = redis_binary()
    if binary is None:
        yield None
        return
    server = ThrowawayRedis(binary)
    try:
        yield server
    finally:
        server.stop()
