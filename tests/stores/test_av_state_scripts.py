"""The av_state store's Lua as it runs: the seed's pins on its scripts, and the
kind carrying exactly the text the store registers."""

from __future__ import annotations

import pytest

from stores.asyncio_runtime import AsyncioRuntime
from stores.av_state import KINDS, SCRIPTS, RedisStateStore, with_ttls
from stores.av_state.contract import COUNTER_TTL_SECONDS, REFUND_MARKER_TTL_SECONDS
from stores.scripts import sha1

COUNTER_SCRIPTS = ("try_spend", "add", "fetch_max", "refund", "refund_many")
REFUND_SCRIPTS = ("refund", "refund_many")
RUN = with_ttls(SCRIPTS)


def test_every_counter_script_applies_the_shared_ttl():
    """Every script that writes a counter expires it with the one shared TTL:
    a literal drifting in one of them would split the session-expiry policy."""
    ttl = str(COUNTER_TTL_SECONDS)
    assert sorted(RUN) == sorted(COUNTER_SCRIPTS)
    for name in COUNTER_SCRIPTS:
        script = RUN.source(name)
        assert (f"EXPIRE', KEYS[1], {ttl}" in script
                or f"EXPIRE', key, {ttl}" in script), f"{name} must EXPIRE with the shared TTL"
        # The seed's guard against an unexpanded placeholder, for ours.
        assert "COUNTER_TTL_SECONDS" not in script, f"{name} has an unexpanded placeholder"
        assert "${" not in script, f"{name} has an unexpanded placeholder"


def test_both_refund_scripts_guard_against_replay_with_a_set_nx_marker():
    """An unmarked refund replayed by a driver's retry credits twice."""
    for name in REFUND_SCRIPTS:
        script = RUN.source(name)
        assert "'NX', 'EX'" in script, name
        assert f"'EX', {REFUND_MARKER_TTL_SECONDS})" in script, name


def test_refund_many_passes_its_amounts_to_decrby_as_exact_integer_strings():
    """Through a Lua double an I64_MAX amount rounds to 2^63, DECRBY rejects
    it mid-loop and the batch half-commits."""
    assert "tonumber(ARGV" not in RUN.source("refund_many")
    assert "redis.call('DECRBY', key, ARGV[i])" in RUN.source("refund_many")


def test_a_placeholder_the_store_does_not_know_fails_at_load():
    with pytest.raises(KeyError, match="SESSION_TTL"):
        with_ttls(SCRIPTS.replacing(add="redis.call('EXPIRE', KEYS[1], ${SESSION_TTL})"))


def test_substituting_the_ttls_twice_changes_nothing():
    assert dict(with_ttls(RUN)) == dict(RUN)


class RecordingPort:
    """A data port that only records the scripts registered on it."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def register_script(self, source: str) -> object:
        self.sources.append(source)
        return object()


def test_the_redis_kind_names_every_script_the_store_registers():
    """The lab labels a call by the SHA1 of the text it sends: the kind must
    carry the substituted text, not the file's."""
    kind = next(kind for kind in KINDS if kind.name == "av_state.redis")
    port = RecordingPort()
    RedisStateStore(port, AsyncioRuntime(), kind.scripts)
    labels = kind.scripts.labels()
    assert sorted(labels[sha1(source)] for source in port.sources) == sorted(COUNTER_SCRIPTS)
