-- Give back one lease. Releasing a lease that is already gone (expired,
-- reclaimed, or released by an earlier attempt whose reply was lost) is a
-- no-op, so a release may be retried freely.
--
-- KEYS[1]  the subject's leases
-- ARGV     lease_id
--
-- Returns 1.

redis.call('HDEL', KEYS[1], ARGV[1])
return 1
