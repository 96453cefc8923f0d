"""The lease family's causes: whom the verdict may blame for each kind of damage.

Every cause but ``store_logic`` names something the lab itself did or
decided (DESIGN "Who is to blame"): a fault it injected, a message it lost,
delayed, misaligned or timed out, a restore under a persistence model, an
eviction, a TTL it configured running out, fail-open admission. What nothing
the lab did explains is the store's own. The fault names are the network's
(``simulator.net.links.MESSAGE_FAULTS``); this module only says which of them
mean what for a lease.
"""

from __future__ import annotations

from simulator.net.links import CALLER_MAY_NOT_KNOW, MESSAGE_FAULTS
from simulator.plugin.attribution import STORE_LOGIC

EXCESS_CAUSES = ("fail_open", "lease_expired_while_held", "server_data_loss", "evicted",
                 "config_change", STORE_LOGIC)
"""Why a caller held a permit without a lease the store counted, so that
more callers held than ``max_in_flight``: admitted unenforced by the
fail-open policy; its lease expired (honestly: at or after the writer's
clock at arrival plus the configured TTL) while it still ran; a restore or
failover lost it; the server evicted it. ``config_change``: callers the
store counted, admitted under a higher ``max_in_flight`` than the lowest in
force (an operator lowered it under callers already holding, or left old and
new limits serving side by side: ``excess``). Excess no uncounted holder nor
the operator's change explains (the store admitted past its own count), and
a caller admitted on another command's reply (the seed's echo check refuses
to act on one: see ``contract``), are ``store_logic``."""

LEAK_CAUSES = ("crash", "abandoned_acquire", "release_lost", "release_gave_up",
               "server_data_loss", STORE_LOGIC)
"""Why a lease the store counted was held by no live caller: its replica
crashed (with the request, or with the release it had spawned); the lab
lost, delayed, misaligned or timed out a message of its acquire (or the
caller's configured timeout ran out) so the caller never took the grant;
one release message failed and no retry landed in time; several release
attempts failed; a restore of older data brought back a lease already
released. Each of these only while the store did what the contract asks
(``contract``: it compensated the abandoned acquire, it retried the failed
release). Anything else (a release or compensation never sent, a failed
release never retried, a refusal that leaves a lease behind, a lease no
request's command owns) is ``store_logic``."""

LAB_LEAK_CAUSES = frozenset(LEAK_CAUSES) - {STORE_LOGIC}

DENIAL_CAUSES = ("leaked_leases", "duplicate_execution", STORE_LOGIC)
"""Why the store answered *exceeded* while the truth had room: leases leaked
for a reason of the lab's filled the slots; a driver retry's second
execution counted the request's own lease against it; or the store's own
decision (including leases it leaked itself, and a refusal read off another
command's reply, which the seed's echo check refuses to act on)."""

CALLER_CANCELLED = "caller_cancelled"
"""What the lab did to a request whose client disconnected before it was
admitted (``workload.patience``): it cancelled the acquire in its handler.
Like a fault on the acquire, it makes a lease the acquire writes nobody's."""

CALL_FAILURES = CALLER_MAY_NOT_KNOW
"""Message faults after which a call (an acquire, a release) may rightly
fail: its caller did not hear what it did (``simulator.net.links``)."""

ATTEMPT_ENDS = MESSAGE_FAULTS & frozenset({"call_timed_out", "call_refused",
                                           "connection_reset", "misaligned_reply"})
"""The faults that end one failed attempt, each reported once per attempt:
a lost request or reply, a stall, a slow reply and a dropped waiter end in
``call_timed_out``; a connection that failed to open also reports its PING's
own end. Counting them counts the release attempts that failed."""
