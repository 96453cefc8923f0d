-- Mutant of migration_apply.lua: adds the claim to both v2 counters without
-- recording (or checking) its token, so a resumed run that applies a claim a
-- killed run had already applied adds it a second time.
--
-- KEYS[1]  the subject's v2 settled-spend counter
-- KEYS[2]  the namespace's v2 settled-spend counter
-- KEYS[3]  the namespace's record of applied claims (unread: the bug)
-- ARGV     token ("<escaped subject>#<sequence>"), amount

local claimed = tonumber(ARGV[2])
if claimed > 0 then
  redis.call('INCRBY', KEYS[1], claimed)
  redis.call('INCRBY', KEYS[2], claimed)
end
return claimed
