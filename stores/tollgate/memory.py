"""``MemoryLedger``: tollgate's ledger in one process (seed 003's MemoryStore).

One instance implements ``LeaseAllocator``, ``UsageSink``, ``AdminStore`` and
``LedgerInspection``. Its "one lock" is the event loop: no method awaits
anything, so each call runs whole before any other starts, and a refusal
raised before the first write leaves nothing behind (every method checks
everything, then writes).

Its state is one ``Books`` value. These rules are also the PostgreSQL
ledger's: it runs each call through a ``MemoryLedger`` over the ``Books`` its
transaction loaded, so this file is the one statement of what a call does.

Rules kept here beyond the traits' own:

* Lease ids come from one ledger-wide sequence and fencing tokens from a
  per-account one, both starting at 1, so a run is reproducible.
* A lease is releasable until ``expires_at + reclaim_grace`` (inclusive);
  after that it is ``LeaseNotActive`` whether or not a sweep has run, so the
  answer never depends on sweep timing. Usage on a lease not yet swept is
  still judged by capacity: reclaim then forfeits only what was not billed.
* Allowance and top-ups are told apart. An account's ``allowance`` is the part
  of its balance funded by the current period; grants spend it first, usage
  on a lease consumes its closed-period allowance first, then its live
  allowance, then top-up. A rollover expires the unspent allowance and marks
  allowance out on leases as *closed*; such units expire when the lease
  settles instead of returning to the balance (so only surviving credit
  floors a consolidation). Clearing a schedule turns allowance into top-up.
* Every stored amount and total stays in ``0..=LEDGER_UNITS_MAX`` (BIGINT):
  a deposit or rollover that would leave it is refused as a storage failure
  (what PostgreSQL's out-of-range error is), and an ingest batch as
  ``IngestRefused``, whole. Account ids and instants are ``BIGINT`` too: an
  account id outside it is a ``ValueError`` at creation, a rollover to a
  period start outside it a storage failure.
* Capability before state before capacity: an ingest event for another
  account or token is rejected whatever the lease's state.
* A zero request funds no grant: refused as any unfundable request is
  (seed 003: "a zero request or a balance unable to fund any grant
  refuses"), whole, the returned lease of a consolidation untouched.
* This ledger always attests: a balance that funds no grant is refused as
  ``BalanceInsufficient`` (funding remains on leases) or ``BalanceExhausted``,
  never the unattested ``InsufficientBalance``.
* ``overage_recorded`` stays zero: the seed's elastic enforcement mode, which
  bills unfunded usage, lies outside its excerpt and is not modelled yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from stores.tollgate.domain import (
    LEDGER_UNITS_MAX,
    MAX_INGEST_BATCH,
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    AccountConfig,
    AccountStatus,
    AccountView,
    Allocation,
    BudgetSchedule,
    CapacityClass,
    Conservation,
    GrantPolicy,
    IngestReport,
    Inspection,
    LeaseGrant,
    LeaseState,
    LeaseView,
    ReclaimBatch,
    ReclaimedLease,
    RolledAccount,
    RolloverBatch,
    StatusChange,
    UsageEvent,
    require_ledger_id,
    require_limit,
    require_units,
)
from stores.tollgate.errors import (
    AccountAlreadyExists,
    AccountClosed,
    AccountInactive,
    AllocateStorage,
    BalanceExhausted,
    BalanceExhaustion,
    BalanceInsufficient,
    BalanceShortfall,
    BudgetUnknownAccount,
    Fenced,
    IngestRefused,
    InvalidRelease,
    InvalidTtl,
    LeaseNotActive,
    StatusUnknownAccount,
    StoreError,
    UnknownAccount,
    UnknownLease,
)
from stores.tollgate.ports import AdminStore, LeaseAllocator, LedgerInspection, UsageSink


@dataclass(slots=True)
class LeaseRecord:
    """One lease as the ledger keeps it: the grant, and how it is funded."""

    grant: LeaseGrant
    live_allowance: int
    """Units of the grant funded by the account's current-period allowance."""
    closed_allowance: int = 0
    """Units funded by a period that has since closed: they expire at settlement."""
    usage: int = 0
    state: LeaseState = LeaseState.ACTIVE
    loss: int = 0
    """Provisional settlement loss left after settling; late usage converts it."""

    def unbilled(self) -> int:
        return self.grant.granted - self.usage


@dataclass(slots=True)
class AccountRecord:
    """One account as the ledger keeps it; ``active`` holds the records (the
    same objects as in ``Books.leases``) of its leases not yet settled."""

    account_id: int
    status: AccountStatus
    capacity_class: CapacityClass
    balance: int
    deposited: int
    schedule: BudgetSchedule | None = None
    period_start: int | None = None
    allowance: int = 0
    overage_recorded: int = 0
    settled_usage: int = 0
    settlement_loss: int = 0
    expired: int = 0
    next_token: int = 1
    active: dict[int, LeaseRecord] = field(default_factory=dict)


@dataclass(slots=True)
class Books:
    """Everything a ledger holds, as mutable records.

    ``MemoryLedger`` keeps one for its whole life. A ledger with storage of its
    own (``PostgresLedger``) builds one per transaction from the rows that
    transaction locked -- each account with all its active leases, plus the
    leases and request ids the call names -- runs the call through a
    ``MemoryLedger`` over it, and writes back what changed: one set of rules
    for both ledgers, so they answer alike by construction."""

    accounts: dict[int, AccountRecord] = field(default_factory=dict)
    leases: dict[int, LeaseRecord] = field(default_factory=dict)
    requests: set[str] = field(default_factory=set)
    """Request ids billed so far (or, for a transaction, those of its batch)."""
    next_lease_id: int = 1


@dataclass(frozen=True, slots=True)
class _Credit:
    """How a settling lease's ``unspent`` splits."""

    allowance: int
    top_up: int
    expired: int

    @property
    def restored(self) -> int:
        return self.allowance + self.top_up


def _next_allowance(state: AccountRecord) -> int:
    """What a rollover deposits: the schedule's allowance, or nothing into a
    closed account. Closing is terminal (seed 003, GL-22) and a deposit into
    it is refused, so no period funds it either; its last period's allowance
    still expires, a fact about time the boundary records."""
    assert state.schedule is not None
    return 0 if state.status is AccountStatus.CLOSED else state.schedule.allowance


def _in_ledger(value: int) -> bool:
    return 0 <= value <= LEDGER_UNITS_MAX


class MemoryLedger(LeaseAllocator, UsageSink, AdminStore, LedgerInspection):
    """The whole ledger in this process's memory."""

    def __init__(self, policy: GrantPolicy | None = None, books: Books | None = None) -> None:
        self.policy = policy or GrantPolicy()
        self.policy.validate()
        self._books = Books() if books is None else books

    # -- reads (``AdminStore.account_view`` and ``LedgerInspection``) ----------

    @staticmethod
    def _conservation(state: AccountRecord) -> Conservation:
        return Conservation(
            deposited=state.deposited,
            overage_recorded=state.overage_recorded,
            balance=state.balance,
            active_lease_grants=sum(lease.grant.granted for lease in state.active.values()),
            settled_usage=state.settled_usage,
            settlement_loss=state.settlement_loss,
            expired=state.expired,
        )

    @staticmethod
    def _lease_view(lease: LeaseRecord) -> LeaseView:
        return LeaseView(lease.grant, lease.state, lease.usage, lease.loss)

    async def conservation(self, account: int) -> Conservation | None:
        state = self._books.accounts.get(account)
        return None if state is None else self._conservation(state)

    async def account_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._books.accounts))

    async def lease_views(self) -> tuple[LeaseView, ...]:
        return tuple(self._lease_view(self._books.leases[lease_id])
                     for lease_id in sorted(self._books.leases))

    async def lease_view(self, lease_id: int) -> LeaseView | None:
        lease = self._books.leases.get(lease_id)
        return None if lease is None else self._lease_view(lease)

    async def account_view(self, account: int) -> AccountView | None:
        state = self._books.accounts.get(account)
        return None if state is None else self._account_view(state)

    def _account_view(self, state: AccountRecord) -> AccountView:
        return AccountView(state.account_id, state.status, state.capacity_class,
                           state.schedule, state.period_start, self._conservation(state))

    async def inspect(self, leases: Sequence[int] = (), statements: Sequence[int] = (),
                      accounts: Sequence[int] = ()) -> Inspection:
        books = self._books
        return Inspection(
            leases={lease_id: None if (lease := books.leases.get(lease_id)) is None
                    else self._lease_view(lease) for lease_id in leases},
            statements={account: None if (state := books.accounts.get(account)) is None
                        else self._conservation(state) for account in statements},
            accounts={account: None if (state := books.accounts.get(account)) is None
                      else self._account_view(state) for account in accounts})

    # -- allocator -----------------------------------------------------------

    async def acquire(self, account: int, requested: int, ttl_ms: int,
                      now: int) -> Allocation:
        require_units("requested", requested)
        state = self._spendable(account)
        expires_at = self._expiry(ttl_ms, now)
        size = self.policy.grant(requested, state.balance)
        if size is None:
            raise self._refusal(state, now)
        return self._grant(state, size, expires_at, now)

    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        lease = self._releasable(lease_id, fencing_token, unspent, now)
        self._settle(lease, unspent, LeaseState.RELEASED)

    async def consolidate(self, lease_id: int, fencing_token: int, unspent: int,
                          requested: int, needed: int, ttl_ms: int, now: int) -> Allocation:
        require_units("requested", requested)
        require_units("needed", needed)
        lease = self._releasable(lease_id, fencing_token, unspent, now)
        state = self._spendable(lease.grant.account_id)
        expires_at = self._expiry(ttl_ms, now)
        credit = self._credit(lease, unspent)
        balance = state.balance + credit.restored
        size = self.policy.consolidation_grant(requested, balance, credit.restored, needed)
        if size is None:
            raise self._refusal(state, now)
        self._settle(lease, unspent, LeaseState.RELEASED)
        return self._grant(state, size, expires_at, now)

    async def reclaim_expired_batch(self, now: int, limit: int) -> ReclaimBatch:
        require_limit(limit)
        cutoff = self.policy.reclaim_cutoff(now)
        due: list[LeaseRecord] = []
        if cutoff is not None:
            # Only the accounts' active leases, not every lease the books ever
            # held (which made each sweep, and so a long run, grow without
            # bound): the same leases, as only ``_settle`` ends one and it
            # takes it off its account's; the sort gives the same order.
            due = sorted((lease for state in self._books.accounts.values()
                          for lease in state.active.values()
                          if lease.state is LeaseState.ACTIVE
                          and lease.grant.expires_at <= cutoff),
                         key=lambda lease: (lease.grant.expires_at, lease.grant.lease_id))
        reclaimed = []
        for lease in due[:limit]:
            self._settle(lease, self._reclaim_unspent(lease), LeaseState.RECLAIMED)
            reclaimed.append(ReclaimedLease(lease.grant.lease_id, lease.grant.account_id,
                                            lease.loss))
        return ReclaimBatch.try_new(reclaimed, limit)

    @staticmethod
    def _reclaim_unspent(lease: LeaseRecord) -> int:
        """Units a reclaim takes as unspent (credited back): none. Its holder
        never released it, so nothing proves a unit of it unspent -- work
        committed and not yet billed may still arrive, into the loss."""
        return 0

    def _spendable(self, account: int) -> AccountRecord:
        state = self._books.accounts.get(account)
        if state is None:
            raise UnknownAccount()
        if state.status is not AccountStatus.ACTIVE:
            raise AccountInactive()
        return state

    def _expiry(self, ttl_ms: int, now: int) -> int:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0:
            raise InvalidTtl()
        expires_at = now + min(ttl_ms, self.policy.max_ttl_ms)
        if not TIMESTAMP_MIN <= expires_at <= TIMESTAMP_MAX:
            raise InvalidTtl()
        return expires_at

    def _releasable(self, lease_id: int, fencing_token: int, unspent: int,
                    now: int) -> LeaseRecord:
        require_units("unspent", unspent)
        lease = self._books.leases.get(lease_id)
        if lease is None:
            raise UnknownLease()
        if lease.grant.fencing_token != fencing_token:
            raise Fenced()
        if (lease.state is not LeaseState.ACTIVE
                or now - self.policy.reclaim_grace_ms > lease.grant.expires_at):
            raise LeaseNotActive()
        if unspent > lease.unbilled():
            raise InvalidRelease()
        return lease

    def _period_end(self, state: AccountRecord, now: int) -> int | None:
        if state.schedule is None:
            return None
        return state.schedule.period_start(now) + state.schedule.period_ms

    def _outstanding(self, state: AccountRecord) -> int:
        return sum(lease.unbilled() for lease in state.active.values())

    def _refusal(self, state: AccountRecord, now: int) -> BalanceExhausted | BalanceInsufficient:
        """The attested refusal when the balance funds no grant: everything left
        is on other leases, or nothing is left at all."""
        period_end = self._period_end(state, now)
        remaining = state.balance + self._outstanding(state)
        if remaining == 0:
            return BalanceExhausted(BalanceExhaustion(period_end))
        return BalanceInsufficient(BalanceShortfall(remaining, period_end))

    def _grant(self, state: AccountRecord, size: int, expires_at: int, now: int) -> Allocation:
        grant = LeaseGrant(self._books.next_lease_id, state.account_id, state.next_token, size,
                           expires_at)
        self._books.next_lease_id += 1
        state.next_token += 1
        live = min(size, state.allowance)
        state.allowance -= live
        state.balance -= size
        lease = LeaseRecord(grant, live_allowance=live)
        self._books.leases[grant.lease_id] = lease
        state.active[grant.lease_id] = lease
        funding = BalanceShortfall(state.balance + self._outstanding(state),
                                   self._period_end(state, now))
        return Allocation(grant, funding)

    @staticmethod
    def _credit(lease: LeaseRecord, unspent: int) -> _Credit:
        """Split ``unspent``: closed-period allowance (expires), then live
        allowance, then top-up -- the reverse of the order usage consumes them."""
        closed_left = max(lease.closed_allowance - lease.usage, 0)
        live_left = max(lease.live_allowance - max(lease.usage - lease.closed_allowance, 0), 0)
        expired = min(unspent, closed_left)
        allowance = min(unspent - expired, live_left)
        return _Credit(allowance, unspent - expired - allowance, expired)

    def _settle(self, lease: LeaseRecord, unspent: int, state_after: LeaseState) -> None:
        account = self._books.accounts[lease.grant.account_id]
        credit = self._credit(lease, unspent)
        account.balance += credit.restored
        account.allowance += credit.allowance
        account.expired += credit.expired
        lease.loss = lease.unbilled() - unspent
        account.settlement_loss += lease.loss
        account.settled_usage += lease.usage
        lease.state = state_after
        del account.active[lease.grant.lease_id]

    # -- usage ---------------------------------------------------------------

    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        if len(events) > MAX_INGEST_BATCH:
            raise IngestRefused(f"a usage batch of {len(events)} events exceeds "
                                f"{MAX_INGEST_BATCH}")
        recorded: set[str] = set()
        usage: dict[int, int] = {}  # lease id -> units staged in this batch
        duplicate = rejected = 0
        for event in events:
            if event.request_id in self._books.requests or event.request_id in recorded:
                duplicate += 1
            elif self._fits(event, usage.get(event.lease_id, 0)):
                usage[event.lease_id] = usage.get(event.lease_id, 0) + event.units
                recorded.add(event.request_id)
            else:
                rejected += 1
        self._refuse_overflow(usage)
        for lease_id, units in usage.items():
            self._bill(self._books.leases[lease_id], units)
        self._books.requests |= recorded
        return IngestReport(accepted=len(recorded), duplicate=duplicate, rejected=rejected)

    def _fits(self, event: UsageEvent, staged: int) -> bool:
        """Domain, then capability, then lease state and capacity."""
        units = event.units
        if isinstance(units, bool) or not isinstance(units, int) or not _in_ledger(units):
            return False
        lease = self._books.leases.get(event.lease_id)
        if (lease is None or lease.grant.account_id != event.account_id
                or lease.grant.fencing_token != event.fencing_token):
            return False
        room = lease.unbilled() if lease.state is LeaseState.ACTIVE else lease.loss
        return staged + units <= room

    def _refuse_overflow(self, usage: dict[int, int]) -> None:
        """Refuse the batch whole if billing it would leave BIGINT anywhere."""
        settled: dict[int, int] = {}
        for lease_id, units in usage.items():
            lease = self._books.leases[lease_id]
            if not _in_ledger(lease.usage + units):
                raise IngestRefused(f"lease {lease_id}: usage would overflow its total")
            if lease.state is not LeaseState.ACTIVE:
                account = lease.grant.account_id
                settled[account] = settled.get(account, 0) + units
        for account, units in settled.items():
            if not _in_ledger(self._books.accounts[account].settled_usage + units):
                raise IngestRefused(f"account {account}: settled usage would overflow")

    def _bill(self, lease: LeaseRecord, units: int) -> None:
        lease.usage += units
        if lease.state is not LeaseState.ACTIVE:
            # Late usage turns provisional loss into billed usage.
            account = self._books.accounts[lease.grant.account_id]
            lease.loss -= units
            account.settlement_loss -= units
            account.settled_usage += units

    # -- admin ---------------------------------------------------------------

    async def create_account(self, config: AccountConfig) -> None:
        require_ledger_id("account_id", config.account_id)
        require_units("initial_balance", config.initial_balance, LEDGER_UNITS_MAX)
        if config.account_id in self._books.accounts:
            raise AccountAlreadyExists()
        self._books.accounts[config.account_id] = AccountRecord(
            config.account_id, config.status, config.capacity_class,
            balance=config.initial_balance, deposited=config.initial_balance)

    async def deposit(self, account: int, units: int) -> None:
        require_units("units", units)
        state = self._books.accounts.get(account)
        if state is None:
            raise UnknownAccount()
        if state.status is AccountStatus.CLOSED:
            raise AccountInactive()
        if not (_in_ledger(state.balance + units) and _in_ledger(state.deposited + units)):
            raise AllocateStorage(StoreError(
                f"account {account}: deposit of {units} leaves the BIGINT range"))
        state.balance += units
        state.deposited += units

    def _open(self, account: int) -> AccountRecord:
        state = self._books.accounts.get(account)
        if state is None:
            raise StatusUnknownAccount()
        return state

    async def set_account_status(self, account: int, status: AccountStatus) -> StatusChange:
        state = self._open(account)
        if state.status is AccountStatus.CLOSED and status is not AccountStatus.CLOSED:
            raise AccountClosed()
        state.status = status
        return StatusChange()

    async def set_capacity_class(self, account: int,
                                 capacity_class: CapacityClass) -> StatusChange:
        state = self._open(account)
        if state.status is AccountStatus.CLOSED:
            raise AccountClosed()
        state.capacity_class = capacity_class
        return StatusChange()

    async def set_budget_schedule(self, account: int,
                                  schedule: BudgetSchedule | None) -> None:
        state = self._books.accounts.get(account)
        if state is None:
            raise BudgetUnknownAccount()
        if schedule is None and state.schedule is not None:
            # Unspent allowance stops expiring: it becomes top-up, on leases too.
            state.allowance = 0
            state.period_start = None
            for lease in state.active.values():
                lease.live_allowance = 0
        state.schedule = schedule

    async def roll_due_periods(self, now: int, limit: int) -> RolloverBatch:
        require_limit(limit)
        due = [state for _, state in sorted(self._books.accounts.items())
               if self._due(state, now)][:limit]
        for state in due:
            self._check_roll(state, now)
        rolled = [self._roll(state, now) for state in due]
        return RolloverBatch.try_new(rolled, limit)

    @staticmethod
    def _check_roll(state: AccountRecord, now: int) -> None:
        """Refuse, before anything is written, a rollover of a scheduled
        account that would leave the BIGINT range."""
        assert state.schedule is not None  # only scheduled accounts are rolled
        allowance = _next_allowance(state)
        if not (_in_ledger(state.balance - state.allowance + allowance)
                and _in_ledger(state.deposited + allowance)
                and _in_ledger(state.expired + state.allowance)
                and TIMESTAMP_MIN <= state.schedule.period_start(now) <= TIMESTAMP_MAX):
            raise StoreError(f"account {state.account_id}: rollover leaves the BIGINT range")

    @staticmethod
    def _due(state: AccountRecord, now: int) -> bool:
        if state.schedule is None:
            return False
        return state.period_start is None or state.schedule.period_start(now) > state.period_start

    @staticmethod
    def _roll(state: AccountRecord, now: int) -> RolledAccount:
        assert state.schedule is not None
        expired = state.allowance
        allowance = _next_allowance(state)
        state.balance += allowance - expired
        state.expired += expired
        state.deposited += allowance
        state.allowance = allowance
        state.period_start = state.schedule.period_start(now)
        for lease in state.active.values():
            lease.closed_allowance += lease.live_allowance
            lease.live_allowance = 0
        return RolledAccount(state.account_id, allowance, expired)
