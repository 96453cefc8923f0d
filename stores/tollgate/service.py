"""The ledger as a service: what the lab's service node runs, transaction by transaction.

``LedgerService`` wraps a ledger (``MemoryLedger``, ``PostgresLedger`` or a
variant's wrapper of either) and answers the verbs a ``LedgerClient`` sends,
each one trait call at the service's clock. Refusals are answers: they are
returned, for the client to raise on the holder's side. A storage failure of
the ledger itself is not a refusal: it is raised, and the lab stops the run
rather than report numbers from a ledger it could not reach.

``open_ledger`` opens a fresh ledger for one run (in process, or in a schema
of its own, named by the lab, on the PostgreSQL at ``url``) and funds one account per key of the
workload, numbered from 1 in the key space's order, each with the budget
schedule the settings give, if any.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from stores.tollgate.domain import AccountConfig, BudgetSchedule
from stores.tollgate.errors import AllocateError, AllocateStorage, IngestRefused
from stores.tollgate.memory import MemoryLedger
from stores.tollgate.settings import TollgateSettings

VERBS = ("acquire", "release", "consolidate", "reclaim_expired_batch", "ingest",
         "roll_due_periods", "due_periods", "roll_periods")
"""The transactions a holder sends (``stores.tollgate.client``); the last two
only ``variants.ReadsThenRolls`` does, to a ledger whose rules answer them."""

NOW_FIRST = ("reclaim_expired_batch", "roll_due_periods", "due_periods")
"""The trait calls taking ``now`` first; every other takes it last."""

REFUSALS = (AllocateError, IngestRefused, ValueError)
"""What a ledger raises to refuse a call; ``AllocateStorage`` is excluded below."""


class LedgerService:
    """A ledger answering one transaction per call (``stores.ports.Service``)."""

    def __init__(self, ledger: Any, dropped_on_close: bool = False) -> None:
        self.ledger = ledger
        self.dropped_on_close = dropped_on_close

    async def transact(self, verb: str, args: tuple[Any, ...], now_ms: int) -> Any:
        if verb not in VERBS:
            raise ValueError(f"the ledger service has no transaction {verb!r}")
        try:
            if verb in NOW_FIRST:
                return await getattr(self.ledger, verb)(now_ms, *args)
            return await getattr(self.ledger, verb)(*args, now_ms)
        except AllocateStorage:
            raise
        except REFUSALS as refusal:
            return refusal

    async def close(self) -> None:
        if self.dropped_on_close:
            await self.ledger.drop()


async def fund_accounts(ledger: Any, accounts: int, deposit: int,
                        schedule: BudgetSchedule | None = None) -> None:
    """Create accounts ``1..accounts``, each with ``deposit`` units and, when
    given, ``schedule`` (whose first allowance the first rollover pass deposits)."""
    for account in range(1, accounts + 1):
        await ledger.create_account(AccountConfig(account_id=account, initial_balance=0))
        await ledger.deposit(account, deposit)
        if schedule is not None:
            await ledger.set_budget_schedule(account, schedule)


async def open_ledger(url: str | None, settings: TollgateSettings, keys: Sequence[Any],
                      name: str, rules: type[MemoryLedger] = MemoryLedger) -> Any:
    """A fresh, funded ledger for one run: in process for ``None``, else on the
    PostgreSQL at ``url`` in the schema ``name`` (dropped by ``drop``). Each
    call runs ``rules`` (a variant's subclass of ``MemoryLedger``) on both."""
    policy = settings.policy()
    if url is None:
        ledger: Any = rules(policy)
    else:
        from stores.tollgate.postgres import PostgresLedger  # only runs that ask for it need it

        ledger = await PostgresLedger.open(url, name, policy)
        ledger.rules = rules
    await fund_accounts(ledger, len(keys), settings.deposit, settings.schedule())
    return ledger


def with_rules(rules: type[MemoryLedger] = MemoryLedger
               ) -> Callable[..., Awaitable[LedgerService]]:
    """A ``StoreKind.service`` opening a fresh ledger whose calls ``rules``
    answers (``MemoryLedger``: the fixed ledger's), in process or on PostgreSQL."""

    async def open_service(url: str | None, settings: TollgateSettings, keys: Sequence[Any],
                           name: str) -> LedgerService:
        ledger = await open_ledger(url, settings, keys, name, rules=rules)
        return LedgerService(ledger, dropped_on_close=url is not None)

    return open_service


open_service = with_rules()
"""``StoreKind.service`` of the fixed ledger."""
