"""A script's refused command reads the same on every server (issue 39):
Valkey words some refusals otherwise than Redis 7, and the lab's shim answers
Redis's words (``virtual_expiry.lab_redis_words``), so a store's replies do
not depend on which server ran it."""

from __future__ import annotations

import pytest

from simulator.backends import BackendSpec, open_redis_backend

REDIS_WORDS = {
    ("GET",): "ERR Wrong number of args calling Redis command from script",
    ("NOPE",): "ERR Unknown Redis command called from script",
    ("WATCH", "lab:k"): "ERR This Redis command is not allowed from script",
}
"""Redis 7.0's refusals; Valkey 9.1 says "calling command", "Unknown
command" and "This Valkey command"."""


@pytest.mark.parametrize("command", REDIS_WORDS, ids=lambda command: command[0])
def test_a_refused_command_reads_as_redis_words_it(backend_name, backend_url, command):
    if backend_name == "fakeredis" and command[0] == "WATCH":
        pytest.skip("fakeredis says 'from scripts': its own words, not a server's")
    backend = open_redis_backend(BackendSpec.parse(backend_url))
    try:
        assert backend.run_command(command, (), 0).error == REDIS_WORDS[command]
    finally:
        backend.close()
