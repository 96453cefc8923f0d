-- refund_many.lua before its EXISTS gate
-- (av_state.variants.refund_not_exists_gated): each key as
-- refund_not_exists_gated.lua, so a batch landing after remove_prefix
-- re-creates every counter it names at 0, with no TTL.
if redis.call('SET', KEYS[#KEYS], '1', 'NX', 'EX', ${REFUND_MARKER_TTL_SECONDS}) == false then
    return -1
end
for i = 1, #KEYS - 1 do
    local key = KEYS[i]
    local new = redis.call('DECRBY', key, ARGV[i])
    if new < 0 then
        redis.call('SET', key, 0)
    else
        redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
    end
end
return 0
