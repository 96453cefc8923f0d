"""A lease is retired once (issue 24): the fixed holder stopped with
``KeyError`` in ``LeaseHolder._exchange`` when a consolidation failed in
transit after the background loop had already retired the same lease (it
ran past its spending time while the call waited for its timeout).

The seed's holder takes a lease out of service once and releases it once
(``../shared/seeds/003_fa119f058ec0ffc5.txt``, the ``LeaseAllocator``
documentation on ambiguous consolidations)."""

from __future__ import annotations

import asyncio

import pytest
from blame import blamed_on_the_store
from manual_runtime import ManualRuntime
from scenario_data import merge
from test_tollgate_family import BASE

from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario
from stores.tollgate.domain import LeaseGrant
from stores.tollgate.errors import AllocateStorage, StoreError
from stores.tollgate.holder import HeldLease, LeaseHolder
from stores.tollgate.settings import TollgateSettings

SLOW_LOST_CONSOLIDATIONS = merge(BASE, {
    "store_settings": {"lease_ttl": "2s", "spend_margin": "100ms"},
    "network": {"timeout": "800ms"},
    "faults": {"schedule": [{"at": "0s", "fault": "lose_reply", "replica": 0,
                             "call": "consolidate", "count": 5}]},
})
"""Leases of two seconds, calls that wait 800 ms for a reply, and the replies
of replica 0's first five consolidations lost: the background loop retires
a lease while its consolidation waits (the run that stopped with ``KeyError: 3``)."""


def test_a_consolidation_lost_while_its_lease_is_retired_does_not_stop_the_run():
    summary = run_scenario(parse_scenario(SLOW_LOST_CONSOLIDATIONS), seed=1).summary
    assert summary["consolidations"] > 0
    assert blamed_on_the_store(summary) == {}


class LostConsolidation:
    """A client whose consolidation fails in transit, after ``meanwhile`` ran."""

    def __init__(self, meanwhile) -> None:
        self.meanwhile = meanwhile

    async def consolidate(self, *args):
        self.meanwhile()
        raise AllocateStorage(StoreError("consolidate: timed out"))


def test_a_lease_the_background_loop_retired_meanwhile_is_retired_once():
    grant = LeaseGrant(lease_id=3, account_id=1, granted=100, fencing_token=7,
                       expires_at=0)
    lease = HeldLease(grant, spent=90)
    holder = LeaseHolder(None, ManualRuntime(), TollgateSettings())
    holder.leases[1] = lease
    holder.client = LostConsolidation(lambda: holder._retire(1))  # the background loop
    with pytest.raises(AllocateStorage):
        asyncio.run(holder._exchange(1, lease, 50))
    assert holder.retiring == [lease]
    assert holder.leases == {}
