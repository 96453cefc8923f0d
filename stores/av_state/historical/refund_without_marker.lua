-- refund.lua before its replay marker (av_state.variants.refund_without_marker).
-- KEYS[2], the marker, is passed and ignored: a driver that re-sends this
-- script after losing its reply credits the counter a second time, giving
-- back budget that was debited once.
if redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
end
local new = redis.call('DECRBY', KEYS[1], ARGV[1])
if new < 0 then
    redis.call('SET', KEYS[1], 0, 'EX', ${COUNTER_TTL_SECONDS})
    return 0
end
redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
return new
