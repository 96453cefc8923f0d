-- refund.lua before its EXISTS gate (av_state.variants.refund_not_exists_gated).
-- DECRBY on a counter remove_prefix cleared re-creates it at -amount, and the
-- clamp SETs it to 0 with no TTL: the cleared session's counter is back, and
-- it never expires.
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS}) == false then
    return -1
end
local new = redis.call('DECRBY', KEYS[1], ARGV[1])
if new < 0 then
    redis.call('SET', KEYS[1], 0)
    return 0
end
redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
return new
