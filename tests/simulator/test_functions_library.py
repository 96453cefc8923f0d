"""The shim and the store bodies load once per run as a Redis Functions library
(``simulator.backends.functions_library``), on a real server and on fakeredis;
a server that refuses falls back to EVALSHA with the same run."""

from __future__ import annotations

import functools
import uuid

import fakeredis
import pytest
import redis

from simulator.backends import BackendError, BackendSpec, open_redis_backend
from simulator.backends.functions_library import FunctionsLibrary
from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario

INCRBY = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
SMALL_DEMO = {"duration": "1s"}


def fingerprint(backend: str | None = None) -> str:
    scenario = load_scenario("data/scenarios/demo.toml", SMALL_DEMO)
    return run_scenario(scenario, backend=backend).summary["trace_fingerprint"]


def libraries(client: redis.Redis) -> set[str]:
    # FUNCTION LIST answers each library as a flat list of names and values.
    return {dict(zip(entry[::2], entry[1::2], strict=True))["library_name"]
            for entry in client.function_list()}


def command_calls(client: redis.Redis, verb: str) -> int:
    return client.info("commandstats").get(f"cmdstat_{verb}", {}).get("calls", 0)


@pytest.fixture
def server(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.mark.redis
def test_a_real_server_runs_the_scripts_as_functions_of_the_runs_library(redis_url, server):
    backend = open_redis_backend(BackendSpec.parse(redis_url))
    try:
        assert backend.library is not None
        assert backend.library.name in libraries(server)
        evalsha_before, fcall_before = command_calls(server, "evalsha"), command_calls(server,
                                                                                        "fcall")
        key = f"{backend.namespace}counter"
        outcomes = [backend.run_script(INCRBY, (key,), ("2",), 0) for _ in range(5)]
        assert [outcome.value for outcome in outcomes] == [2, 4, 6, 8, 10]
        assert command_calls(server, "fcall") - fcall_before == 5
        assert command_calls(server, "evalsha") == evalsha_before
        assert backend.server_script_seconds() > 0
    finally:
        backend.close()
    assert backend.library.name not in libraries(server)


@pytest.mark.redis
def test_two_runs_on_one_server_keep_their_libraries_apart(redis_url, server):
    first = open_redis_backend(BackendSpec.parse(redis_url))
    second = open_redis_backend(BackendSpec.parse(redis_url))
    try:
        assert first.library.name != second.library.name
        # The same bodies in both, loaded in a different order.
        assert first.run_script(INCRBY, (f"{first.namespace}k",), ("1",), 0).value == 1
        assert second.run_command(("SET", f"{second.namespace}k", "x"),
                                  (f"{second.namespace}k",), 0).value == "OK"
        assert second.run_script(INCRBY, (f"{second.namespace}n",), ("7",), 0).value == 7
        first.close()
        assert first.library.name not in libraries(server)
        assert second.run_script(INCRBY, (f"{second.namespace}n",), ("1",), 0).value == 8
    finally:
        second.close()
    assert not {first.library.name, second.library.name} & libraries(server)


@pytest.mark.redis
def test_a_real_server_gives_the_fakeredis_run(redis_url):
    assert fingerprint(redis_url) == fingerprint("fakeredis")


@pytest.mark.redis
def test_a_server_that_refuses_function_load_falls_back_with_the_same_run(redis_url, server):
    user, password = f"lab_no_function_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    # Everything but FUNCTION (LOAD, LIST, DELETE...): EVALSHA and FCALL stay allowed.
    server.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                       channels=["*"], commands=["+@all", "-function"])
    refused_url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
    try:
        backend = open_redis_backend(BackendSpec.parse(refused_url))
        try:
            assert backend.library is None
            evalsha_before = command_calls(server, "evalsha")
            key = f"{backend.namespace}counter"
            assert backend.run_script(INCRBY, (key,), ("3",), 0).value == 3
            assert command_calls(server, "evalsha") == evalsha_before + 1
        finally:
            backend.close()
        assert fingerprint(refused_url) == fingerprint(redis_url)
    finally:
        server.acl_deluser(user)


def test_fakeredis_without_functions_falls_back_with_the_same_run(monkeypatch):
    with_functions = fingerprint("fakeredis")
    # A fakeredis posing as Redis 6 has no FUNCTION or FCALL.
    monkeypatch.setattr(fakeredis, "FakeServer",
                        functools.partial(fakeredis.FakeServer, version=(6, 2)))
    backend = open_redis_backend(BackendSpec.parse("fakeredis"))
    try:
        assert backend.library is None
        assert backend.run_script(INCRBY, ("lab:k",), ("4",), 0).value == 4
    finally:
        backend.close()
    assert fingerprint("fakeredis") == with_functions


def test_on_fakeredis_a_body_is_compiled_when_it_first_appears_not_on_every_call(monkeypatch):
    from fakeredis.commands_mixins import _lua_functions, scripting_mixin

    counted = {"library compiles": 0, "script compiles": 0}

    def counting(name, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            counted[name] += 1
            return method(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(_lua_functions.FunctionsEngine, "_create_library",
                        counting("library compiles",
                                 _lua_functions.FunctionsEngine._create_library))
    monkeypatch.setattr(scripting_mixin.ScriptingCommandsMixin, "eval",
                        counting("script compiles", scripting_mixin.ScriptingCommandsMixin.eval))
    scenario = load_scenario("data/scenarios/demo.toml", SMALL_DEMO)
    executed = run_scenario(scenario, backend="fakeredis").summary["scripts_executed"]
    assert executed > 1_000
    # One load at the start (the plain-command body), one per store body since.
    assert 2 <= counted["library compiles"] <= 10
    assert counted["script compiles"] == 0


def test_a_library_flushed_mid_run_stops_the_run():
    backend = open_redis_backend(BackendSpec.parse("fakeredis"))
    try:
        assert backend.run_script(INCRBY, ("lab:k",), ("1",), 0).value == 1
        backend.client.execute_command("FUNCTION", "FLUSH")
        with pytest.raises(BackendError, match="lost the lab's scripts"):
            backend.run_script(INCRBY, ("lab:k",), ("1",), 0)
    finally:
        backend.close()


def test_a_reload_refused_mid_run_sends_new_bodies_by_evalsha(monkeypatch):
    backend = open_redis_backend(BackendSpec.parse("fakeredis"))
    try:
        assert backend.run_script(INCRBY, ("lab:k",), ("1",), 0).value == 1
        loaded = backend.library.function_for(INCRBY)

        def refuse(*args, **kwargs):
            raise redis.exceptions.ResponseError("ERR refused")

        monkeypatch.setattr(backend.library.client, "execute_command", refuse)
        assert backend.library.function_for("return 2") is None
        monkeypatch.undo()
        assert backend.run_script("return redis.call('GET', KEYS[1])", ("lab:k",), (),
                                  0).value == "1"
        assert backend.library.function_for(INCRBY) == loaded
        assert backend.run_script(INCRBY, ("lab:k",), ("1",), 0).value == 2
    finally:
        backend.close()


def test_an_uncaught_error_names_no_run_token():
    library = FunctionsLibrary(client=None, name="lab_0123456789ab")
    message = "ERR oops script: lab_0123456789ab_3, on @user_function:12."
    assert library.plain(message) == "ERR oops script: lab_3, on @user_function:12."
