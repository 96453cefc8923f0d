-- refund_many.lua converting its amounts through tonumber
-- (av_state.variants.refund_many_tonumber). A Lua number is a double: an
-- amount of I64_MAX (what the store clamps a larger one to) rounds to 2^63,
-- which DECRBY rejects. The error stops the script mid-loop, and Redis keeps
-- what ran before it: the keys before that amount are refunded, the rest not.
if redis.call('SET', KEYS[#KEYS], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS}) == false then
    return -1
end
for i = 1, #KEYS - 1 do
    local key = KEYS[i]
    if redis.call('EXISTS', key) == 1 then
        local new = redis.call('DECRBY', key, tonumber(ARGV[i]))
        if new < 0 then
            redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})
        else
            redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
        end
    end
end
return 0
