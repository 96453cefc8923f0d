"""The summary's schema: the keys every run's ``summary.json`` has, whatever
its family, declared once.

The run writes them (``simulator.run.compose``), the console report groups
them (``simulator.present.report``), preflight lists them among the metrics
a scenario can name (``simulator.run.preflight``), and ``fields`` describes
them. A family adds its own keys through its oracle's summary and its
``SummaryLayout``; ``COUNTED_EVENTS`` gains the events only its stores meet
(``Family.counted_events``).
"""

from __future__ import annotations

from simulator.backends.redis_backend import SCRIPT_ERRORS
from simulator.scenario.conditions import STORE_RAISED

RUN_FIELDS = ("scenario", "store", "backend", "seed", "replicas", "virtual_duration_us")
"""The ``run`` group's first lines, for every family."""
INCONCLUSIVE = "inconclusive"
"""Why the run could not judge the store, in one line (absent when it could:
``simulator.run.exercise``)."""
STORE_ANSWERS = "store_answers"
"""How many requests the store answered: served or refused (the family's two answers)."""
TEXT_FIELDS = ("scenario", "store", "backend", "trace_fingerprint", INCONCLUSIVE, STORE_RAISED)
"""The summary's entries that name things rather than measure them."""
MIGRATION_TOTALS = ("migrations_completed", "migration_reruns")
"""What every run counts of its operator migrations; a family adds what its
migrations report (``Family.migration_totals``)."""
RUN_TOTALS = (*MIGRATION_TOTALS, "noscript_replies_count", "swallowed_io_by_dead_replicas",
              STORE_ANSWERS)
"""What every run counts besides its trace events (``simulator.run.compose``)."""
DETERMINISM = ("trace_events", "trace_fingerprint")
"""How a run's trace is told apart from another's."""
CLUSTER_FIGURES = ("shards", "busiest_shard_share", "crossslot_refusals", "cluster_redirects",
                   "keys_migrated")
"""How a Redis run's work spread over its shards (one server: one shard,
all of the work, no refusal): ``simulator.net.cluster``."""
BACKEND_TOTALS = {"redis": ("scripts_executed", "store_commands_executed", SCRIPT_ERRORS,
                            *CLUSTER_FIGURES),
                  "service": ("transactions_executed",)}
"""The work a run's server did, by the kind of server it ran."""


COUNTED_EVENTS = (
    "replica_boot_failed", "replica_started", "store_raised", "call_executed", "request_lost",
    "reply_lost", "call_retried", "call_timed_out", "call_refused", "late_reply",
    "reply_to_dead_replica",
    "duplicate_execution", "key_expired", "key_evicted", "fault_crash", "replica_restarted",
    "fault_pause", "fault_partition", "fault_server_restart", "fault_failover",
    "fault_latency_spike", "fault_lose_request", "fault_lose_reply", "fault_migration_killed",
    "fault_slot_migration", "call_redirected",
)
"""Trace events whose counts go into the summary: how often each situation
actually occurred, so a clean result can be told from one that exercised
nothing. A family adds the ones only its stores meet (``Family.counted_events``)."""
