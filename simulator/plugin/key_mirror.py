"""One mirror of the Redis keys a family follows on a server, kept decoded.

After each command the server returns the post-state of every key the
command declared (``simulator.backends.virtual_expiry``), one entry a key:

* ``[key, type(, value)]``: the key as a whole, ``none`` for one gone (a
  string's or a hash's value read in full; other types by name only);
* ``[key, "fields", [name, value or None, ...]]``: a hash changed field by
  field, each field the command named as it is now (``None``: gone); the
  rest of the hash is what the lab last saw;
* ``[key, "same"]``: a key the command only read.

``KeyMirror`` parses those entries once for every family: it knows the keys
it follows, each with its ``Role`` (how its raw content decodes), keeps
every followed key's decoded content (a hash as a dict, patched in place by
``fields`` entries), hears of keys that vanish without a command
(``dropped``: expiry, eviction) and of every followed key read afresh after
a restore (``resync``). A family's server observer (a ``ServerObserver``) is
a ``KeyMirror`` that declares its keys (``follow``) and says what to tell its
oracle (``report``, and ``resynced`` for a restore); it keeps its own
``check``.

What the mirror hands ``report`` is one ``(redis_key, content, changes)``
tuple per followed key, in the order the entries (or keys) came:

* ``content``: the key's decoded content now (a hash: the mirror itself),
  ``UNCHANGED`` for a key the command only read;
* ``changes``: for a hash, the fields that changed, ``{name: decoded value,
  or None for one removed}`` (removals first); ``None`` for a key only read
  or one that decodes to no dict.

Rules kept here:

* A hash patched field by field costs what the command changed: only the
  fields a ``fields`` entry names are decoded and compared, so a field's cost
  does not grow with the number of fields beside it.
* The mirror is complete because every change to a followed key reaches it
  (commands, expiry, eviction, restores) and every run starts empty; each
  family's ``check`` compares its oracle's books with the backend at the end.
* A hash's content is the mirror's own dict, changed in place by later
  entries: a report reads it and keeps a copy if it keeps anything.
* Keys under ``prefixes`` are followed from their first post-state, with the
  ``on_sight`` role, and forgotten once they expire: an expired key never
  comes back by a restore (the write replayed expires again), so it need not
  be read after one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from simulator.engine.kernel import SimulationError

UNCHANGED = object()
"""The content of a key a command only read: what the mirror last had."""

NO_COMMAND = -1
"""The tag of a change no command made (expiry, eviction, a restore)."""

Seen = tuple[str, Any, dict[str, Any] | None]
"""One followed key as an entry left it: ``(redis_key, content, changes)``."""


class Role:
    """How the keys of one role read.

    ``decode(raw)`` turns a key's raw content into what the family reads:
    ``raw`` is ``None`` for an absent key, a string as written, a hash as a
    dict of its fields (all of them, or only those a ``fields`` entry named)
    or a flat ``HGETALL`` list; a hash decodes to a dict, by field (a store
    kind's ``decode`` with the role bound: ``partial(kind.decode, name)``).
    ``types``, when given, are the only types a key of this role may be left
    as besides gone (``none``); another stops the run, since the lab cannot
    follow it. ``name`` names the role in that error.
    """

    __slots__ = ("name", "decode", "types")

    def __init__(self, name: str, decode: Callable[[Any], Any],
                 types: Iterable[str] | None = None) -> None:
        self.name = name
        self.decode = decode
        self.types = None if types is None else frozenset(types)


class KeyMirror:
    """The decoded content of every Redis key a family follows on a server.

    A subclass declares its keys (``follow``, or ``prefixes`` with an
    ``on_sight`` role) and implements ``report``.
    """

    def __init__(self, prefixes: tuple[str, ...] = (), on_sight: Role | None = None) -> None:
        self.roles: dict[str, Role] = {}
        """Every followed key's role, in the order followed."""
        self.contents: dict[str, Any] = {}
        """Every followed key's decoded content, once an entry told it."""
        self.prefixes = prefixes
        self.on_sight = on_sight
        assert on_sight is not None or not prefixes, "keys followed on sight need a role"
        self.server: Any = None
        """The server followed (``attach``): what a report may read besides
        post-states, such as a key's virtual deadline."""

    # -- what a family declares and reads ------------------------------------

    def follow(self, redis_key: str, role: Role) -> None:
        """Follow ``redis_key``, read as ``role`` says."""
        self.roles[redis_key] = role

    def content(self, redis_key: str) -> Any:
        """What a followed key holds now, decoded (what an absent key decodes to
        before any entry told it: every run starts empty)."""
        if redis_key in self.contents:
            return self.contents[redis_key]
        return self.roles[redis_key].decode(None)

    def kept_without_expiry(self, redis_key: str) -> bool:
        """The server holds ``redis_key`` now, with no expiry. Read once the
        pipeline ran: a later command in it may have emptied (deleted) a key
        a command wrote, so an absent key is no finding."""
        server = self.server
        return (server is not None and server.deadline_us(redis_key) is None
                and bool(server.read_ledger_keys([redis_key])[redis_key]))

    def report(self, seen: list[Seen], now_us: int, tag: int, how: str) -> None:
        """Tell the oracle what ``seen`` says (never empty): ``how`` is
        ``command`` (``tag``: the request it was sent for) or what dropped the
        keys, ``key_expired``, ``evicted`` (``tag`` is ``NO_COMMAND``)."""
        raise NotImplementedError

    def resynced(self, seen: list[Seen], now_us: int, how: str) -> None:
        """After a restore: every followed key as read afresh (``how``, as the
        server says, ``data_loss``); reported as a whole unless a family says
        otherwise."""
        if seen:
            self.report(seen, now_us, NO_COMMAND, how)

    # -- the ServerObserver protocol -----------------------------------------

    def attach(self, server: Any) -> None:
        """Told once, before anything executes, the server followed."""
        self.server = server

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds its keys' post-state entries: the
        mirror takes in those of followed keys and reports them."""
        seen: list[Seen] = []
        roles = self.roles
        for entry in observed:
            redis_key = entry[0]
            role = roles.get(redis_key)
            if role is None:
                if not redis_key.startswith(self.prefixes):
                    continue
                role = roles[redis_key] = self.on_sight
            kind = entry[1]
            if kind == "same":
                seen.append((redis_key, UNCHANGED, None))
                continue
            if role.types is not None and kind != "none" and kind not in role.types:
                raise SimulationError(f"the store left {redis_key!r} as a {kind}, not a "
                                      f"{role.name}: the lab cannot follow it")
            if kind == "fields":
                seen.append(self._patched(redis_key, role, entry[2]))
            else:
                seen.append(self._replaced(redis_key, role,
                                           entry[2] if len(entry) > 2 else None))
        if seen:
            self.report(seen, now_us, tag, "command")

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: expired, lost, evicted."""
        roles = self.roles
        seen = [self._replaced(redis_key, roles[redis_key], None)
                for redis_key in redis_keys if redis_key in roles]
        if seen:
            self.report(seen, now_us, NO_COMMAND, how)
        if how == "key_expired" and self.on_sight is not None:
            for redis_key in redis_keys:
                if roles.get(redis_key) is self.on_sight:
                    del roles[redis_key]
                    self.contents.pop(redis_key, None)

    def ledger_keys(self) -> list[str]:
        """Every followed key: those declared in the order declared, then those
        followed on sight, sorted (the order they were seen in is the run's)."""
        sight = self.on_sight
        if sight is None:
            return list(self.roles)
        declared = [redis_key for redis_key, role in self.roles.items() if role is not sight]
        return declared + sorted(redis_key for redis_key, role in self.roles.items()
                                 if role is sight)

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """After a restore: every followed key's raw content as read afresh
        (``read``, by Redis key; a key missing from it is absent)."""
        roles = self.roles
        self.resynced([self._replaced(redis_key, roles[redis_key], read.get(redis_key))
                       for redis_key in self.ledger_keys()], now_us, how)

    # -- the mirror -------------------------------------------------------------

    def _patched(self, redis_key: str, role: Role, named: list) -> Seen:
        """A hash changed field by field: only the fields named are decoded."""
        mirror = self.contents.get(redis_key)
        if mirror is None:
            mirror = self.contents[redis_key] = {}
        written = {}
        changes: dict[str, Any] = {}
        for name, value in zip(named[::2], named[1::2], strict=True):
            if value is None:
                if name in mirror:
                    changes[name] = None
                    del mirror[name]
            else:
                written[name] = value
        for name, value in role.decode(written).items():
            if mirror.get(name) != value:
                changes[name] = mirror[name] = value
        return redis_key, mirror, changes

    def _replaced(self, redis_key: str, role: Role, raw: Any) -> Seen:
        """A key's whole raw content (``None``: absent), decoded; for a hash,
        what changed from the mirror."""
        content = role.decode(raw)
        contents = self.contents
        if not isinstance(content, dict):
            contents[redis_key] = content
            return redis_key, content, None
        old = contents.get(redis_key)
        contents[redis_key] = content
        if not isinstance(old, dict):
            old = {}
        changes: dict[str, Any] = {name: None for name in old.keys() - content.keys()}
        changes.update({name: value for name, value in content.items()
                        if old.get(name) != value})
        return redis_key, content, changes
