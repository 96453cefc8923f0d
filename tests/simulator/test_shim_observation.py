"""The shim's post-states and TTL states are what the server holds.

The shim answers much of what it reports from what the script's own verbs
told it (a hash field's value from the ``HSET`` that wrote it, a counter from
``INCRBY``'s reply, a TTL from the ``PEXPIRE`` it rewrote), asking the server
only what it cannot know. Random scripts over two keys (hashes, strings, sets
and lists) check that every such shortcut agrees with the server: after each
script, the lab's mirror of each key (rebuilt from the reports alone, as the
oracle's observer does) equals the key's content, and the lab holds a virtual
deadline exactly for the keys that carry the shim's sentinel TTL.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.backends import BackendSpec, open_redis_backend

FIELDS = ("a", "b", "c")

# One Lua statement per verb, over KEYS[k] (k = 1 or 2).
VERBS = {
    "hset": lambda k, f, n: f"redis.call('HSET', KEYS[{k}], '{f}', '{n}')",
    "hset_number": lambda k, f, n: f"redis.call('HSET', KEYS[{k}], '{f}', {n})",
    "hmset": lambda k, f, n: f"redis.call('HSET', KEYS[{k}], '{f}', '{n}', 'z', 'x{n}')",
    "hdel": lambda k, f, n: f"redis.call('HDEL', KEYS[{k}], '{f}')",
    "hincrby": lambda k, f, n: f"redis.call('HINCRBY', KEYS[{k}], '{f}', {n})",
    "hsetnx": lambda k, f, n: f"redis.call('HSETNX', KEYS[{k}], '{f}', '{n}')",
    "incrby": lambda k, f, n: f"redis.call('INCRBY', KEYS[{k}], {n})",
    # Refused by the server (not an integer): writes nothing, the script goes on.
    "incrby_refused": lambda k, f, n: f"redis.pcall('INCRBY', KEYS[{k}], '{n}.5')",
    "incrbyfloat": lambda k, f, n: f"redis.call('INCRBYFLOAT', KEYS[{k}], '{n}.5')",
    "set": lambda k, f, n: f"redis.call('SET', KEYS[{k}], '{n}')",
    "set_px": lambda k, f, n: f"redis.call('SET', KEYS[{k}], '{n}', 'PX', {1000 * n + 1})",
    "del": lambda k, f, n: f"redis.call('DEL', KEYS[{k}])",
    "pexpire": lambda k, f, n: f"redis.call('PEXPIRE', KEYS[{k}], {1000 * n + 1})",
    "pexpire_now": lambda k, f, n: f"redis.call('PEXPIRE', KEYS[{k}], 0)",
    "sadd": lambda k, f, n: f"redis.pcall('SADD', KEYS[{k}], '{f}')",
    "srem": lambda k, f, n: f"redis.pcall('SREM', KEYS[{k}], '{f}')",
    "lpush": lambda k, f, n: f"redis.pcall('LPUSH', KEYS[{k}], '{f}')",
    "lpop": lambda k, f, n: f"redis.pcall('LPOP', KEYS[{k}])",
    "get": lambda k, f, n: f"redis.pcall('GET', KEYS[{k}])",
    "hgetall": lambda k, f, n: f"redis.pcall('HGETALL', KEYS[{k}])",
}

statement = st.builds(lambda verb, k, f, n: VERBS[verb](k, f, n),
                      st.sampled_from(sorted(VERBS)), st.sampled_from((1, 2)),
                      st.sampled_from(FIELDS), st.integers(1, 9))
scripts = st.lists(st.lists(statement, min_size=1, max_size=6), min_size=1, max_size=6)

_run_numbers = itertools.count()


def mirror_after(mirror: dict, entry: list) -> None:
    """Apply one ``observed`` entry to the lab's picture of the keys, the way
    ``simulator.plugin.key_mirror.KeyMirror`` does (undecoded, and keeping the
    types the shim reports by name only)."""
    key, kind = entry[0], entry[1]
    if kind == "same":
        return
    if kind == "fields":
        content = mirror.get(key)
        content = mirror[key] = content if isinstance(content, dict) else {}
        changes = entry[2]
        for name, value in zip(changes[::2], changes[1::2], strict=True):
            if value is None:
                content.pop(name, None)
            else:
                content[name] = value
        return
    value = entry[2] if len(entry) > 2 else None
    if kind == "hash":
        mirror[key] = dict(zip(value[::2], value[1::2], strict=True))
    elif kind == "string":
        mirror[key] = value
    else:
        # Gone, or a type the lab reports by name only.
        mirror[key] = kind if kind != "none" else None


def held(backend, key: str):
    kind = backend.read("TYPE", key)
    if kind == "hash":
        return backend.read("HGETALL", key)
    if kind == "string":
        return backend.read("GET", key)
    return None if kind == "none" else kind


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scripts=scripts)
def test_what_the_shim_reports_is_what_the_server_holds(backend_url, scripts):
    backend = open_redis_backend(BackendSpec.parse(backend_url))
    try:
        run = next(_run_numbers)
        keys = (f"{backend.namespace}shim:{run}:one", f"{backend.namespace}shim:{run}:two")
        mirror: dict = {}
        for step, lines in enumerate(scripts):
            # Each script runs at a later virtual time, after due keys expire.
            now_us = step * 1_000
            for key in backend.expire_due(now_us):
                mirror[key] = None
            outcome = backend.run_script("\n".join(lines) + "\nreturn 1", keys, (), now_us,
                                         observe=True)
            for entry in outcome.observed:
                mirror_after(mirror, entry)
            for key in keys:
                assert mirror.get(key) == held(backend, key), (key, lines, outcome)
                has_sentinel = backend.read("PTTL", key) > 0
                assert has_sentinel == (backend.expiry.deadline_us(key) is not None), (
                    key, lines, outcome)
    finally:
        backend.close()
