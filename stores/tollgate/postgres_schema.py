"""The PostgreSQL ledger's schema: one schema per ledger, its tables, its checks.

A ledger lives in a schema of its own, named ``lab_...`` so an operator can
tell the lab's from anything else on the server; the ledger creates it, works
only inside it (every connection's ``search_path`` is that schema alone) and
drops only it. A marker row (``ledger.layout``) says the schema is a tollgate
ledger of this layout, so reopening never adopts a stranger's ``lab_`` schema.

The tables hold ``MemoryLedger``'s records column for column (see
``postgres_books``). Amounts, instants and ids are ``BIGINT``, as the seed
states; the CHECK constraints restate the domain (nonnegative amounts,
``allowance <= balance``, an active lease carries no loss, closed is a valid
status...) so that a bug in the rules fails the transaction instead of
corrupting the books. Lease ids come from the ``ledger`` row's counter,
updated inside the granting transaction: a refused grant rolls it back, where
a ``SEQUENCE`` would burn an id and make the two ledgers' ids diverge.
"""

from __future__ import annotations

import enum
import re

from stores.tollgate.domain import AccountStatus, CapacityClass, LeaseState

LAYOUT = "tollgate-ledger-1"
"""The marker a ledger schema carries; a new layout gets a new name."""

SCHEMA_NAME = re.compile(r"^lab_[a-z0-9_]{1,40}$")


def require_schema_name(schema: str) -> str:
    """``schema`` if it names a lab schema, else ``ValueError``: the name is
    spliced into DDL as an identifier, so nothing else may pass."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema must match {SCHEMA_NAME.pattern}, got {schema!r}")
    return schema


def _one_of(column: str, values: type[enum.Enum]) -> str:
    listed = ", ".join(f"'{member.value}'" for member in values)
    return f"CHECK ({column} IN ({listed}))"


TABLES = f"""
CREATE TABLE ledger (
    layout TEXT PRIMARY KEY CHECK (layout = '{LAYOUT}'),
    next_lease_id BIGINT NOT NULL CHECK (next_lease_id >= 1)
);
INSERT INTO ledger (layout, next_lease_id) VALUES ('{LAYOUT}', 1);

CREATE TABLE account (
    account_id BIGINT PRIMARY KEY,
    status TEXT NOT NULL {_one_of("status", AccountStatus)},
    capacity_class TEXT NOT NULL {_one_of("capacity_class", CapacityClass)},
    balance BIGINT NOT NULL CHECK (balance >= 0),
    deposited BIGINT NOT NULL CHECK (deposited >= 0),
    schedule_allowance BIGINT CHECK (schedule_allowance >= 0),
    schedule_period_ms BIGINT CHECK (schedule_period_ms > 0),
    schedule_anchor_ms BIGINT,
    period_start BIGINT,
    allowance BIGINT NOT NULL CHECK (allowance >= 0 AND allowance <= balance),
    overage_recorded BIGINT NOT NULL CHECK (overage_recorded >= 0),
    settled_usage BIGINT NOT NULL CHECK (settled_usage >= 0),
    settlement_loss BIGINT NOT NULL CHECK (settlement_loss >= 0),
    expired BIGINT NOT NULL CHECK (expired >= 0),
    next_token BIGINT NOT NULL CHECK (next_token >= 1),
    -- a schedule is all three columns or none; without one, no period and
    -- no allowance (clearing a schedule turns allowance into top-up)
    CHECK ((schedule_allowance IS NULL) = (schedule_period_ms IS NULL)
           AND (schedule_period_ms IS NULL) = (schedule_anchor_ms IS NULL)),
    CHECK (schedule_period_ms IS NOT NULL OR (period_start IS NULL AND allowance = 0))
);

CREATE TABLE lease (
    lease_id BIGINT PRIMARY KEY CHECK (lease_id >= 1),
    account_id BIGINT NOT NULL REFERENCES account (account_id),
    fencing_token BIGINT NOT NULL CHECK (fencing_token >= 1),
    granted BIGINT NOT NULL CHECK (granted >= 1),
    expires_at BIGINT NOT NULL,
    live_allowance BIGINT NOT NULL CHECK (live_allowance >= 0),
    closed_allowance BIGINT NOT NULL CHECK (closed_allowance >= 0),
    usage BIGINT NOT NULL CHECK (usage >= 0 AND usage <= granted),
    state TEXT NOT NULL {_one_of("state", LeaseState)},
    loss BIGINT NOT NULL CHECK (loss >= 0 AND loss <= granted - usage),
    UNIQUE (account_id, fencing_token),
    CHECK (live_allowance <= granted - closed_allowance),
    CHECK (state <> '{LeaseState.ACTIVE.value}' OR loss = 0)
);
-- an account's active leases (loaded with it), and the reclaim sweep's order
CREATE INDEX lease_active_by_account ON lease (account_id, lease_id)
    WHERE state = '{LeaseState.ACTIVE.value}';
CREATE INDEX lease_active_by_expiry ON lease (expires_at, lease_id)
    WHERE state = '{LeaseState.ACTIVE.value}';

-- request ids billed, as UTF-8 bytes (a str may hold what TEXT cannot: NUL)
CREATE TABLE request (
    request_id BYTEA PRIMARY KEY
);
"""
"""The tables, run with ``search_path`` set to the ledger's schema."""
