-- Raise the counter KEYS[1] to ARGV[1] if that is higher (or the counter is
-- absent); the value it holds after, or -1 when the stored value is not a
-- count within 0..ARGV[2] (av_state's FETCH_MAX_LUA).
local stored = redis.call('GET', KEYS[1])
local current = tonumber(stored or '0')
local value = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
-- Not a count in 0..limit: refuse, and write nothing.
if current == nil or current < 0 or current > limit then return -1 end
-- An absent counter takes the value even when it is 0, so it exists after.
if stored == false or value > current then
    redis.call('SET', KEYS[1], ARGV[1])
    current = value
end
redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
return current
