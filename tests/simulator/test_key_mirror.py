"""The shared key mirror (``simulator.plugin.key_mirror``): one parse of the
server's post-states for every family's server observer.

Each test drives a ``KeyMirror`` with the entries a server reports (whole
values, ``fields`` patches, ``same``), drops and restores, and checks what it
keeps and what it hands ``report``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from simulator.backends import BackendSpec, open_redis_backend
from simulator.engine.kernel import SimulationError
from simulator.plugin.key_mirror import NO_COMMAND, UNCHANGED, KeyMirror, Role


def decode(role: str, raw: Any) -> Any:
    """A hash as ``{field: int}`` (a flat ``HGETALL`` list read too), a
    string as an int; ``{}`` or ``None`` for an absent key."""
    if role == "hash":
        if isinstance(raw, list):
            raw = dict(zip(raw[::2], raw[1::2], strict=True))
        return {name: int(value) for name, value in (raw or {}).items()}
    return None if raw is None else int(raw)


class Recording(KeyMirror):
    """A mirror that records every report."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.reports: list[tuple[list, int, int, str]] = []

    def report(self, seen, now_us, tag, how):
        # A hash's content is the mirror's own dict: keep a copy.
        self.reports.append(([(key, dict(content) if isinstance(content, dict) else content,
                               changes) for key, content, changes in seen], now_us, tag, how))


HASH = Role("hash", partial(decode, "hash"))
STRING = Role("string", partial(decode, "string"))


def mirror() -> Recording:
    followed = Recording()
    followed.follow("h", HASH)
    followed.follow("s", STRING)
    return followed


def test_a_fields_patch_decodes_only_the_named_fields_and_reports_what_changed():
    decoded: list[dict] = []

    def counting(raw):
        decoded.append(dict(raw) if isinstance(raw, dict) else raw)
        return decode("hash", raw)

    followed = Recording()
    followed.follow("h", Role("hash", counting))
    followed.executed((["h", "hash", ["a", "1", "b", "2", "c", "3"]],), 10, 7)
    assert followed.reports[-1] == ([("h", {"a": 1, "b": 2, "c": 3},
                                      {"a": 1, "b": 2, "c": 3})], 10, 7, "command")
    decoded.clear()
    # b removed, c rewritten, a named but unchanged, d new.
    followed.executed((["h", "fields", ["b", None, "c", "30", "a", "1", "d", "4"]],), 20, 8)
    assert decoded == [{"c": "30", "a": "1", "d": "4"}]  # only the fields named
    ((key, content, changes),), now_us, tag, how = followed.reports[-1]
    assert (key, content, now_us, tag, how) == ("h", {"a": 1, "c": 30, "d": 4}, 20, 8, "command")
    assert changes == {"b": None, "c": 30, "d": 4}
    assert list(changes)[0] == "b"  # removals first
    assert followed.content("h") == {"a": 1, "c": 30, "d": 4}
    # A field removed that the mirror never had is no change.
    followed.executed((["h", "fields", ["zz", None]],), 30, 9)
    assert followed.reports[-1][0] == [("h", {"a": 1, "c": 30, "d": 4}, {})]


def test_a_patch_on_a_hash_never_seen_starts_from_empty():
    followed = mirror()
    followed.executed((["h", "fields", ["a", "5"]], ["s", "string", "12"]), 0, 1)
    assert followed.reports == [([("h", {"a": 5}, {"a": 5}), ("s", 12, None)], 0, 1, "command")]
    assert followed.content("h") == {"a": 5}
    assert followed.content("s") == 12


def test_a_key_only_read_is_reported_unchanged_and_unfollowed_keys_are_ignored():
    followed = mirror()
    followed.executed((["h", "hash", ["a", "1"]],), 0, 1)
    followed.executed((["h", "same"], ["elsewhere", "string", "3"], ["s", "same"]), 5, 2)
    assert followed.reports[-1] == ([("h", UNCHANGED, None), ("s", UNCHANGED, None)],
                                    5, 2, "command")
    assert followed.content("h") == {"a": 1}
    assert followed.content("s") is None  # never told: absent, as every run starts
    followed.executed((["elsewhere", "string", "3"],), 6, 3)
    assert len(followed.reports) == 2  # nothing followed: no report


def test_a_whole_value_replaces_the_hash_and_reports_the_difference():
    followed = mirror()
    followed.executed((["h", "hash", ["a", "1", "b", "2"]],), 0, 1)
    followed.executed((["h", "hash", {"b": "2", "c": "3"}],), 1, 2)
    ((_, content, changes),), *_ = followed.reports[-1]
    assert content == {"b": 2, "c": 3}
    assert changes == {"a": None, "c": 3}
    followed.executed((["h", "none"], ["s", "none"]), 2, 3)
    assert followed.reports[-1][0] == [("h", {}, {"b": None, "c": None}), ("s", None, None)]


def test_dropped_keys_read_as_absent():
    followed = mirror()
    followed.executed((["h", "hash", ["a", "1"]], ["s", "string", "4"]), 0, 1)
    followed.dropped(["s", "elsewhere", "h"], 50, "key_expired")
    assert followed.reports[-1] == ([("s", None, None), ("h", {}, {"a": None})],
                                    50, NO_COMMAND, "key_expired")
    assert followed.content("h") == {} and followed.content("s") is None
    assert followed.ledger_keys() == ["h", "s"]  # declared keys stay followed
    followed.dropped(["elsewhere"], 60, "evicted")
    assert len(followed.reports) == 2  # nothing followed: no report


def test_resync_reads_every_followed_key_afresh():
    followed = mirror()
    followed.executed((["h", "hash", ["a", "1", "b", "2"]], ["s", "string", "4"]), 0, 1)
    # A restore brought back b's older value and lost a and s.
    followed.resync({"h": ["b", "1", "c", "9"]}, 70, "data_loss")
    assert followed.reports[-1] == ([("h", {"b": 1, "c": 9}, {"a": None, "b": 1, "c": 9}),
                                     ("s", None, None)], 70, NO_COMMAND, "data_loss")
    # The mirror is the restored state: the next patch applies to it.
    followed.executed((["h", "fields", ["c", None]],), 80, 2)
    assert followed.reports[-1][0] == [("h", {"b": 1}, {"c": None})]


def test_a_family_may_report_only_what_a_restore_changed():
    class OnlyChanged(Recording):
        def resynced(self, seen, now_us, how):
            super().resynced([each for each in seen if each[2]], now_us, how)

    followed = OnlyChanged()
    followed.follow("h", HASH)
    followed.follow("g", HASH)
    followed.executed((["h", "hash", ["a", "1"]], ["g", "hash", ["a", "2"]]), 0, 1)
    followed.resync({"h": ["a", "1"], "g": ["a", "3"]}, 5, "data_loss")
    assert followed.reports[-1] == ([("g", {"a": 3}, {"a": 3})], 5, NO_COMMAND, "data_loss")
    followed.resync({"h": ["a", "1"], "g": ["a", "3"]}, 6, "data_loss")
    assert len(followed.reports) == 2  # nothing changed: no report


def test_keys_under_a_prefix_are_followed_on_sight_and_forgotten_when_they_expire():
    counter = Role("counter", partial(decode, "string"), types=("string",))
    followed = Recording(prefixes=("p:", "q:"), on_sight=counter)
    followed.follow("declared", STRING)
    followed.executed((["p:b", "string", "2"], ["x:a", "string", "1"], ["q:a", "same"],
                       ["declared", "string", "5"]), 0, 1)
    assert followed.reports[-1][0] == [("p:b", 2, None), ("q:a", UNCHANGED, None),
                                       ("declared", 5, None)]
    # Declared keys first, in the order declared; then those seen, sorted.
    assert followed.ledger_keys() == ["declared", "p:b", "q:a"]
    followed.dropped(["p:b", "declared"], 10, "evicted")
    assert followed.ledger_keys() == ["declared", "p:b", "q:a"]  # evicted: a restore may return
    followed.dropped(["p:b", "declared"], 20, "key_expired")
    assert followed.reports[-1][0] == [("p:b", None, None), ("declared", None, None)]
    assert followed.ledger_keys() == ["declared", "q:a"]
    followed.resync({"q:a": "7"}, 30, "data_loss")
    assert followed.reports[-1][0] == [("declared", None, None), ("q:a", 7, None)]


def test_a_key_left_as_a_type_its_role_cannot_follow_stops_the_run():
    counter = Role("counter", partial(decode, "string"), types=("string",))
    followed = Recording(prefixes=("p:",), on_sight=counter)
    followed.executed((["p:a", "none"], ["p:b", "same"]), 0, 1)  # gone or read: fine
    for entry in (["p:a", "hash", ["f", "1"]], ["p:a", "fields", ["f", "1"]], ["p:a", "set"]):
        with pytest.raises(SimulationError, match="as a .*, not a counter"):
            followed.executed((entry,), 1, 2)


def test_the_server_is_what_attach_gave():
    followed = mirror()
    server = object()
    followed.attach(server)
    assert followed.server is server


def raw_hash(content: Any) -> dict:
    """A hash as a dict of its fields, undecoded (``{}`` when absent)."""
    if isinstance(content, list):
        return dict(zip(content[::2], content[1::2], strict=True))
    return dict(content or {})


def raw_string(content: Any) -> Any:
    return content


@pytest.mark.parametrize("backend_name", ["fakeredis"])
def test_the_mirror_follows_what_the_shim_reports(backend_url):
    """Scripts that patch, replace, delete and only read a hash and a string:
    after each, the mirror holds what the server does."""
    backend = open_redis_backend(BackendSpec.parse(backend_url))
    try:
        keys = (f"{backend.namespace}mirror:h", f"{backend.namespace}mirror:s")
        followed = Recording()
        followed.follow(keys[0], Role("hash", raw_hash))
        followed.follow(keys[1], Role("string", raw_string))
        scripts = [
            "redis.call('HSET', KEYS[1], 'a', '1', 'b', '2') redis.call('SET', KEYS[2], 'x')",
            "redis.call('HDEL', KEYS[1], 'a') redis.call('HSET', KEYS[1], 'c', '3')",
            "redis.call('HGETALL', KEYS[1]) redis.call('GET', KEYS[2])",
            "redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'd', '4')",
            "redis.call('HINCRBY', KEYS[1], 'd', 5) redis.call('DEL', KEYS[2])",
            "redis.call('HDEL', KEYS[1], 'd')",
        ]
        for step, body in enumerate(scripts):
            outcome = backend.run_script(body + "\nreturn 1", keys, (), step * 1_000,
                                         observe=True)
            followed.executed(outcome.observed, step * 1_000, step)
            assert followed.content(keys[0]) == (backend.read("HGETALL", keys[0]) or {}), body
            assert followed.content(keys[1]) == backend.read("GET", keys[1]), body
        kinds = [[entry[1] for entry in seen] for seen, *_ in followed.reports]
        assert kinds[2] == [UNCHANGED, UNCHANGED]  # the script that only read
    finally:
        backend.close()
