"""Mutant (holder): a usage batch re-sent after a failure in transit is given
fresh request ids.

The bug is on the flush's retry path: the holder "makes sure" the re-sent
batch is not taken for a duplicate by renaming its events. If the first
delivery committed and only its reply was lost, the ledger bills every event
twice. The seed: ingest is idempotent on ``request_id``, and a re-sent batch
must carry the same ids (003_fa119f058ec0ffc5.txt:1199-1202, 1239-1241)."""

from __future__ import annotations

import dataclasses

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.errors import IngestRefused, IngestUnavailable, StoreError
from stores.tollgate.holder import LeaseHolder

MUTANT = LedgerMutant(
    name="flush_resends_with_fresh_ids",
    breaks="the holder re-sends an unanswered usage batch under fresh request ids",
    seed=("003_fa119f058ec0ffc5.txt:1199-1202", "003_fa119f058ec0ffc5.txt:1239-1241"),
    exposed_by={"faults": {"schedule": [{"at": "1s", "fault": "lose_reply", "replica": 1,
                                         "call": "ingest", "count": 1}]}},
    damage=("double_billed_units",),
    fault="reply_lost",
)


class ResendsWithFreshIds(LeaseHolder):
    async def flush(self) -> None:
        while self.pending:
            batch = self.pending[:self.settings.ingest_batch]
            try:
                report = await self.client.ingest(batch)
                report.validate(len(batch))
            except IngestUnavailable:
                # The bug: the events are renamed before they are sent again.
                self.pending[:len(batch)] = [
                    dataclasses.replace(event, request_id=f"{event.request_id}'")
                    for event in batch]
                return
            except IngestRefused:
                pass
            except StoreError:
                return
            del self.pending[:len(batch)]


KIND = register_ledger_mutant(MUTANT, holder_class=ResendsWithFreshIds)
