-- refund_many.lua before its replay marker
-- (av_state.variants.refund_without_marker). KEYS[#KEYS], the marker, is
-- passed and ignored: a re-sent batch credits every counter a second time.
for i = 1, #KEYS - 1 do
    local key = KEYS[i]
    if redis.call('EXISTS', key) == 1 then
        local new = redis.call('DECRBY', key, ARGV[i])
        if new < 0 then
            redis.call('SET', key, 0, 'EX', ${COUNTER_TTL_SECONDS})
        else
            redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
        end
    end
end
return 0
