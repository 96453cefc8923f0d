"""The ledger family's observer: reads the ledger after every transaction.

The service node reports each transaction as ``(verb, args, reply)``; the
observer reads what it touched -- the leases it granted, settled or billed,
the accounts a rollover moved into a new period, and their accounts'
funding statements -- in one inspection read
(``stores.tollgate.ports.LedgerInspection.inspect``: one round trip on
PostgreSQL), and files them with the oracle. Those reads are the lab's,
not modelled messages: they cost no virtual time and change nothing. At
the end of the run the oracle's books must be exactly what the ledger
holds; a difference is a lab bug.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families.tollgate.oracle import LedgerOracle
from stores.tollgate.domain import Allocation, Inspection, ReclaimBatch, RolloverBatch
from stores.tollgate.errors import LeaseNotActive


class LedgerObserver:
    """A ``ServerObserver`` of a service node running a tollgate ledger."""

    def __init__(self, oracle: LedgerOracle, layouts: list[tuple[Any, Any]],
                 keys: list[Any]) -> None:
        self.oracle = oracle
        self._server: Any = None

    @property
    def server(self) -> Any:
        """The service node (``attach``)."""
        return self._server

    def attach(self, server: Any) -> None:
        # Every account's opening statement, so the series starts funded.
        self._server = server
        for account in self.oracle.accounts:
            self.oracle.statement(account, self._read(self._ledger.conservation(account)))

    def _read(self, coroutine: Any) -> Any:
        return self.server.read(coroutine)

    @property
    def _ledger(self) -> Any:
        return self.server.service.ledger

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        verb, args, reply = observed
        self.oracle.transaction(now_us, tag, verb, args)
        refused = isinstance(reply, Exception)
        seen = self._inspect(verb, args, reply, refused)
        touched_leases: list[int] = []
        accounts: set[int] = set()
        stale = False
        if verb in ("release", "consolidate"):
            lease_id, token, unspent = args[0], args[1], args[2]
            book = self.oracle.leases.get(lease_id)
            accepted = not refused
            if book is not None:
                book.touched_by.add(tag)
                if accepted and (book.state != "active" or token != book.grant.fencing_token):
                    stale = True
                    self.oracle.fencing_violation(book)
                self.oracle.returned(book, unspent, now_us, accepted,
                                     not_active=isinstance(reply, LeaseNotActive))
                if accepted:
                    self._seen(seen, lease_id, now_us, credited=unspent)
        if refused:
            if verb in ("acquire", "consolidate"):
                self.oracle.allocation_refused(verb, args, reply,
                                               seen.account(self._refused_account(verb, args)))
            return
        if isinstance(reply, Allocation):
            self.oracle.granted(reply.grant, now_us, tag, verb, stale_exchange=stale)
            touched_leases.append(reply.grant.lease_id)
        elif isinstance(reply, ReclaimBatch):
            touched_leases += [lease.lease_id for lease in reply.reclaimed]
        elif isinstance(reply, RolloverBatch):
            for rolled in reply.rolled:
                view = seen.account(rolled.account_id)
                self.oracle.rolled(rolled.account_id, rolled.deposited, rolled.expired,
                                   view.period_start)
                accounts.add(rolled.account_id)
        elif verb == "ingest":
            for event in args[0]:
                self.oracle.usage_arrived(event.request_id)
            touched_leases += self._ingested(args[0])
            for lease_id in touched_leases:
                self.oracle.leases[lease_id].touched_by.add(tag)
        billed_before = {lease_id: self.oracle.leases[lease_id].billed
                         for lease_id in touched_leases if lease_id in self.oracle.leases}
        for lease_id in touched_leases:
            accounts.add(self._seen(seen, lease_id, now_us))
        if verb == "ingest":
            self._check_capabilities(args[0], billed_before)
            asked: dict[int, int] = {}
            for event in args[0]:
                asked[event.lease_id] = asked.get(event.lease_id, 0) + event.units
            for lease_id in touched_leases:
                self.oracle.billed(self.oracle.leases[lease_id], asked.get(lease_id, 0))
        if verb in ("release", "consolidate") and args[0] in self.oracle.leases:
            accounts.add(self.oracle.leases[args[0]].grant.account_id)
        for account in sorted(accounts):
            self.oracle.statement(account, seen.statement(account))
        if verb == "consolidate" and isinstance(reply, Allocation):
            statement = self.oracle.accounts[reply.grant.account_id].statement
            self.oracle.exchange_sized(reply.grant, args[4], statement.balance)

    def _inspect(self, verb: str, args: tuple, reply: Any, refused: bool) -> _Seen:
        """Everything ``executed`` will read of the ledger after this
        transaction, in one inspection read (``LedgerInspection.inspect``):
        the leases it touched, the accounts it refused or rolled, and the
        funding statements of the accounts those leases are drawn on, as the
        oracle's books know them (one the ledger names otherwise is read
        on its own when asked for: the same answer, a read more)."""
        leases: list[int] = []
        accounts: list[int] = []
        known = self.oracle.leases
        if verb in ("release", "consolidate") and not refused and args[0] in known:
            leases.append(args[0])
        if refused:
            if verb in ("acquire", "consolidate"):
                accounts.append(self._refused_account(verb, args))
        elif isinstance(reply, Allocation):
            leases.append(reply.grant.lease_id)
        elif isinstance(reply, ReclaimBatch):
            leases += [lease.lease_id for lease in reply.reclaimed]
        elif isinstance(reply, RolloverBatch):
            accounts += [rolled.account_id for rolled in reply.rolled]
        elif verb == "ingest":
            leases += self._ingested(args[0])
        drawn_on = {reply.grant.lease_id: reply.grant.account_id} if isinstance(
            reply, Allocation) else {}
        statements = sorted({*accounts, *(drawn_on.get(lease_id) or known[lease_id].grant.account_id
                                          for lease_id in leases
                                          if lease_id in drawn_on or lease_id in known)})
        inspection = (self._read(self._ledger.inspect(leases, statements, accounts))
                      if leases or accounts else Inspection({}, {}, {}))
        return _Seen(inspection, self._read_one)

    def _read_one(self, read: str, key: int) -> Any:
        """One of the ledger's single reads (``lease_view``, ``conservation``…) of ``key``."""
        return self._read(getattr(self._ledger, read)(key))

    def _refused_account(self, verb: str, args: tuple) -> int:
        """The account a refused acquire or consolidate was drawn on."""
        if verb == "acquire" or args[0] not in self.oracle.leases:
            return args[0]
        return self.oracle.leases[args[0]].grant.account_id

    def _ingested(self, events: Any) -> list[int]:
        """The leases an ingest billed that the oracle knows, ascending."""
        return sorted({event.lease_id for event in events if event.lease_id in self.oracle.leases})

    def _check_capabilities(self, events: Any, billed_before: dict[int, int]) -> None:
        """Usage billed to a lease beyond what the events presenting its own
        capability (lease, account, token) carried was accepted from a holder
        presenting another's: a fencing violation."""
        rightful: dict[int, int] = {}
        for event in events:
            book = self.oracle.leases.get(event.lease_id)
            if book is not None and (event.account_id, event.fencing_token) == (
                    book.grant.account_id, book.grant.fencing_token):
                rightful[event.lease_id] = rightful.get(event.lease_id, 0) + event.units
        for lease_id, before in billed_before.items():
            if self.oracle.leases[lease_id].billed - before > rightful.get(lease_id, 0):
                self.oracle.fencing_violation(self.oracle.leases[lease_id])

    def _seen(self, seen: _Seen, lease_id: int, now_us: int, credited: int = 0) -> int:
        view = seen.lease(lease_id)
        self.oracle.lease_seen(view, now_us, credited)
        return view.grant.account_id

    # A service keeps what it committed: nothing expires, is evicted or restored.

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        raise SimulationError(f"a ledger lost state ({how}): a service node drops nothing")

    def ledger_keys(self) -> list[str]:
        return []

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """A service comes back from a restart with everything it committed."""

    def check(self, server: Any) -> None:
        """The books must be the ledger's record, lease by lease and account by account."""
        views = self._read(self._ledger.lease_views())
        if len(views) != len(self.oracle.leases):
            raise SimulationError(f"the ledger holds {len(views)} leases, the oracle "
                                  f"followed {len(self.oracle.leases)}")
        for view in views:
            book = self.oracle.leases.get(view.grant.lease_id)
            if book is None or (book.state, book.billed, book.loss) != (
                    view.state.value, view.usage, view.loss):
                raise SimulationError(f"lease {view.grant.lease_id}: the ledger holds {view}, "
                                      f"the oracle {book}")
        for account, book in self.oracle.accounts.items():
            statement = self._read(self._ledger.conservation(account))
            if book.statement is not None and statement != book.statement:
                raise SimulationError(f"account {account}: the ledger states {statement}, "
                                      f"the oracle {book.statement}")


class _Seen:
    """One transaction's inspection read; what it did not cover (the oracle's
    books predicted another account than the ledger names) is read on its
    own by ``read_one(read, key)``, e.g. ``read_one("conservation", 7)``."""

    def __init__(self, inspection: Inspection, read_one: Callable[[str, int], Any]) -> None:
        self._inspection = inspection
        self._read_one = read_one

    def lease(self, lease_id: int) -> Any:
        return self._found(self._inspection.leases, "lease_view", lease_id)

    def statement(self, account: int) -> Any:
        return self._found(self._inspection.statements, "conservation", account)

    def account(self, account: int) -> Any:
        return self._found(self._inspection.accounts, "account_view", account)

    def _found(self, read: dict[int, Any], name: str, key: int) -> Any:
        return read[key] if key in read else self._read_one(name, key)
