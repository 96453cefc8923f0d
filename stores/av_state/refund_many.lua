-- Refund several counters atomically: KEYS[i] gets ARGV[i] back, each exactly
-- as refund.lua would (EXISTS gate, DECRBY, clamp at zero with a fresh TTL);
-- the last key, KEYS[#KEYS], is the batch's one replay marker (see
-- refund.lua). Reply: 0, or -1 a replay (av_state's REFUND_MANY_LUA).
if redis.call('SET', KEYS[#KEYS], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS}) == false then
    return -1
end
for i = 1, #KEYS - 1 do
    local key = KEYS[i]
    if redis.call('EXISTS', key) == 1 then
        -- The raw integer string, never a Lua number: converted through a
        -- double, an I64_MAX amount rounds to 2^63, DECRBY rejects it mid-loop,
        -- and the keys before it stay refunded while the rest do not.
        local new = redis.call('DECRBY', key, ARGV[i])
        if new < 0 then
            redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})
        else
            redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
        end
    end
end
return 0
