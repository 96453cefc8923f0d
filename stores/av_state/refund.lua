-- Give ARGV[1] back to the counter KEYS[1], clamped at zero; KEYS[2] is the
-- refund's one-shot replay marker (av_state's REFUND_LUA). Reply: the new
-- value; 0 when the counter is gone (nothing to credit); -1 a replay.
--
-- A driver that transparently retries a script after losing its reply would
-- otherwise credit the budget twice: spendable budget minted out of a network
-- flap. SET NX on the marker makes the replay a no-op. (Spend scripts have no
-- marker on purpose: their replay double-debits, which fails conservative.)
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS}) == false then
    return -1
end
-- Gated on EXISTS: a counter remove_prefix cleared stays cleared. A bare
-- DECRBY would re-create it at -amount, and the clamp would SET it to 0 with
-- no TTL: a permanent key per racing refund.
if redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
end
-- ARGV[1] goes to DECRBY as the caller's exact integer string.
local new = redis.call('DECRBY', KEYS[1], ARGV[1])
if new < 0 then
    redis.call('SET', KEYS[1], 0, 'EX', ${COUNTER_TTL_SECONDS})
    return 0
end
redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
return new
