"""Random ledger histories: a Hypothesis state machine over any tollgate ledger.

``LedgerHistory`` drives a ledger through random acquires, releases,
consolidations, usage batches (replays, stale tokens, over-capacity and
out-of-domain units included), reclaims, account creation, deposits, status
and class changes, schedules and rollovers over a moving clock, and checks
after each step that every account's equation holds exactly, that monotone
terms never fall, and that every ingest report partitions its batch.
Refusals are expected moves; a storage failure is not.

A subclass says which ledger with ``make_ledger`` (and may release it in
``teardown``); ``test_tollgate_conservation`` runs it on ``MemoryLedger``,
``test_tollgate_postgres_differential`` on both ledgers side by side.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tollgate_ledgers import run

from stores.tollgate import errors
from stores.tollgate.domain import (
    LEDGER_UNITS_MAX,
    AccountConfig,
    AccountStatus,
    BudgetSchedule,
    CapacityClass,
    GrantPolicy,
    LeaseGrant,
    UsageEvent,
)

ACCOUNTS = (1, 2, 3)
"""1 and 2 exist from the start; 3 only once a step creates it."""
POLICY = GrantPolicy(shrink_divisor=2, min_grant=1, max_ttl_ms=1_000, reclaim_grace_ms=200)
REFUSALS = (errors.UnknownAccount, errors.AccountInactive, errors.InsufficientBalance,
            errors.BalanceExhausted, errors.BalanceInsufficient, errors.InvalidTtl,
            errors.UnknownLease, errors.Fenced, errors.LeaseNotActive, errors.InvalidRelease)


class LedgerHistory(RuleBasedStateMachine):
    def make_ledger(self) -> Any:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.ledger = self.make_ledger()
        self.now = 0
        self.grants: list[LeaseGrant] = []
        self.held: dict[int, LeaseGrant] = {}  # leases not yet known to be settled
        self.tokens: dict[int, int] = {}
        self.request_ids = 0
        self.floors: dict[int, tuple[int, int, int]] = {}
        run(self.ledger.create_account(AccountConfig(1, 100)))
        # Account 2 lives on an allowance alone, so rollovers catch allowance
        # out on leases often.
        run(self.ledger.create_account(AccountConfig(2, 0)))
        run(self.ledger.set_budget_schedule(2, BudgetSchedule(60, 500)))
        run(self.ledger.roll_due_periods(0, 2))
        # A lease on each from the start, so usage, releases and
        # consolidations are possible from the first step.
        for account in (1, 2):
            self._granted(run(self.ledger.acquire(account, 20, 600, 0)).grant)

    def _granted(self, grant: LeaseGrant) -> None:
        assert grant.fencing_token > self.tokens.get(grant.account_id, 0)
        self.tokens[grant.account_id] = grant.fencing_token
        self.grants.append(grant)
        self.held[grant.lease_id] = grant

    def _draw_lease(self, data) -> LeaseGrant:
        """Mostly a lease still held, sometimes any lease ever granted."""
        if self.held and data.draw(st.integers(0, 3)):
            return data.draw(st.sampled_from(sorted(self.held.values(),
                                                    key=lambda grant: grant.lease_id)))
        return data.draw(st.sampled_from(self.grants))

    @rule(ms=st.integers(0, 300))
    def advance(self, ms: int) -> None:
        self.now += ms

    @rule(account=st.sampled_from(ACCOUNTS), requested=st.integers(1, 80),
          ttl=st.integers(-1, 1_500))
    def acquire(self, account: int, requested: int, ttl: int) -> None:
        try:
            allocation = run(self.ledger.acquire(account, requested, ttl, self.now))
        except REFUSALS:
            return
        assert 1 <= allocation.grant.granted <= requested
        self._granted(allocation.grant)

    @precondition(lambda self: self.grants)
    @rule(data=st.data(), stale=st.booleans())
    def release(self, data, stale: bool) -> None:
        grant = self._draw_lease(data)
        unspent = data.draw(st.integers(0, grant.granted + 1))
        try:
            run(self.ledger.release(grant.lease_id, grant.fencing_token + stale, unspent,
                                    self.now))
        except REFUSALS:
            return
        del self.held[grant.lease_id]

    @precondition(lambda self: self.grants)
    @rule(data=st.data(), requested=st.integers(1, 80), needed=st.integers(0, 120),
          ttl=st.integers(0, 1_500))
    def consolidate(self, data, requested: int, needed: int, ttl: int) -> None:
        grant = self._draw_lease(data)
        unspent = data.draw(st.integers(0, grant.granted + 1))
        try:
            allocation = run(self.ledger.consolidate(grant.lease_id, grant.fencing_token,
                                                     unspent, requested, needed, ttl, self.now))
        except REFUSALS:
            return
        del self.held[grant.lease_id]
        self._granted(allocation.grant)

    @precondition(lambda self: self.grants)
    @rule(data=st.data(), count=st.integers(1, 6))
    def ingest(self, data, count: int) -> None:
        events = []
        for _ in range(count):
            grant = self._draw_lease(data)
            if data.draw(st.booleans()) or not self.request_ids:
                self.request_ids += 1
            recent = st.integers(max(self.request_ids - 3, 1), self.request_ids)
            request_id = f"r{data.draw(recent)}"
            units = data.draw(st.integers(0, 30) | st.sampled_from((-1, LEDGER_UNITS_MAX + 1)))
            events.append(UsageEvent(request_id, grant.lease_id, grant.account_id,
                                     grant.fencing_token + data.draw(st.sampled_from((0, 0, 1))),
                                     units))
        report = run(self.ledger.ingest(events, self.now))
        report.validate(len(events))

    @rule(limit=st.integers(1, 3))
    def reclaim(self, limit: int) -> None:
        batch = run(self.ledger.reclaim_expired_batch(self.now, limit))
        assert len(batch) <= limit
        for lease in batch.reclaimed:
            del self.held[lease.lease_id]

    @rule(account=st.sampled_from(ACCOUNTS), balance=st.integers(0, 50),
          status=st.sampled_from(AccountStatus))
    def create_account(self, account: int, balance: int, status: AccountStatus) -> None:
        try:
            run(self.ledger.create_account(AccountConfig(account, balance, status)))
        except errors.AccountAlreadyExists:
            assert run(self.ledger.account_view(account)) is not None

    @rule(account=st.sampled_from(ACCOUNTS), units=st.integers(0, 50))
    def deposit(self, account: int, units: int) -> None:
        try:
            run(self.ledger.deposit(account, units))
        except errors.UnknownAccount:
            assert run(self.ledger.account_view(account)) is None
        except errors.AccountInactive:
            assert run(self.ledger.account_view(account)).status is AccountStatus.CLOSED

    @rule(account=st.sampled_from(ACCOUNTS), status=st.sampled_from(AccountStatus))
    def set_status(self, account: int, status: AccountStatus) -> None:
        try:
            run(self.ledger.set_account_status(account, status))
        except errors.StatusUnknownAccount:
            assert run(self.ledger.account_view(account)) is None
        except errors.AccountClosed:
            assert status is not AccountStatus.CLOSED

    @rule(account=st.sampled_from(ACCOUNTS), capacity_class=st.sampled_from(CapacityClass))
    def set_capacity_class(self, account: int, capacity_class: CapacityClass) -> None:
        try:
            run(self.ledger.set_capacity_class(account, capacity_class))
        except errors.StatusUnknownAccount:
            assert run(self.ledger.account_view(account)) is None
        except errors.AccountClosed:
            assert run(self.ledger.account_view(account)).status is AccountStatus.CLOSED

    @rule(account=st.sampled_from(ACCOUNTS),
          schedule=st.none() | st.builds(BudgetSchedule, st.integers(0, 60),
                                         st.integers(300, 2_000), st.integers(0, 500)))
    def set_schedule(self, account: int, schedule: BudgetSchedule | None) -> None:
        try:
            run(self.ledger.set_budget_schedule(account, schedule))
        except errors.BudgetUnknownAccount:
            assert run(self.ledger.account_view(account)) is None

    @rule(limit=st.integers(1, 2))
    def roll(self, limit: int) -> None:
        run(self.ledger.roll_due_periods(self.now, limit))

    @invariant()
    def every_account_balances(self) -> None:
        for account in ACCOUNTS:
            c = run(self.ledger.conservation(account))
            if c is None:
                continue
            assert c.holds(), f"account {account}: residual {c.residual()} in {c}"
            assert min(c.balance, c.active_lease_grants, c.settled_usage,
                       c.settlement_loss, c.expired) >= 0
            floor = (c.deposited, c.overage_recorded, c.expired)
            previous = self.floors.get(account, (0, 0, 0))
            assert all(now >= then for now, then in zip(floor, previous, strict=True)), (
                "deposited, overage and expired only grow")
            self.floors[account] = floor
