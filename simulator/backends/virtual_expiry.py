"""Key TTLs in virtual time, on any Redis, fake or real.

Neither backend's clock can follow the simulation: fakeredis reads the wall
clock and a real server cannot be time-shifted at all. So the lab owns every
deadline:

* Each script a store runs is wrapped in a small Lua shim (``wrap``). The
  store's script body runs unchanged, but TTL commands inside it
  (``PEXPIRE``/``EXPIRE``, ``SET ... EX|PX``) are rewritten to give the key a
  far-away *sentinel* TTL, and the TTL the script asked for is returned to the
  lab beside the script's own reply.
* When the lab asks (the oracle follows a store's state exactly), the shim
  also returns the post-state of every key in ``KEYS`` the body wrote to:
  strings in full; a hash written only by hash verbs as the fields those
  verbs named (``fields``: name, value or false for gone — the lab keeps the
  rest of the hash, so the work is the change, not the hash); other hashes in
  full, other types by name; a key it only read is reported as ``same`` (its
  state is what the lab last saw).
* After the body, the shim reports for every key it wrote to or set a TTL on
  whether the key is gone, has no TTL (a ``SET`` or a re-creation cleared it),
  or still carries the sentinel. A command that only reads cannot change a
  key's TTL, so read keys are not asked. The lab keeps the deadlines
  (``VirtualExpiry``) and deletes a key once virtual time reaches its
  deadline, before the next command runs.

TTL reads inside a script (``TTL``, ``PTTL``, ``EXPIRETIME``...), absolute
expiries (``PEXPIREAT``...) and ``TIME`` would see the sentinel or the wall
clock; the shim refuses them with an error rather than let them lie. Scripts
must declare the keys they touch in ``KEYS`` (as Redis Cluster requires): an
undeclared key's TTL is only tracked when set through an intercepted command.
The shim creates no Lua globals (one global poisons a fakeredis server).
"""

from __future__ import annotations

import heapq

SENTINEL_TTL_MS = 3_000_000_000_000
"""About 95 years: long enough that no backend ever expires a key itself."""

# Reply shape of a wrapped script: {status, calls, ttl_pairs, key_states,
# observed, reply}, where ``calls`` counts the commands the body itself ran.
# The reply goes last because a nil inside a Lua array truncates it.
# The lab appends two arguments to ARGV: on a cluster's node, its script's slot,
# the node's first and last slots, a slot it serves besides (migrated in, or
# being imported for this call), one it no longer serves (migrated out), and a
# slot it is migrating whose keys the shim checks as Redis does (each -1 for
# none: 'SLOT:FIRST:LAST:GAINED:LOST:MIGRATING'; '' off a cluster); then '1' to
# have the post-state of every key in KEYS returned as ``observed`` ({key,
# type[, value]} each, or {key, 'same'} for a key the body only read). The shim
# takes them off again before the body runs, so the body sees the ARGV it was sent.
STATUS_NIL, STATUS_VALUE, STATUS_ERROR = 0, 1, 2
KEY_GONE, KEY_PERSISTENT, KEY_SENTINEL = -2, -1, 1

# Tables the shim only reads: built once per compiled shim, not per call.
_SHIM_CONSTANTS = r"""
local lab_reads = {GET = 1, MGET = 1, STRLEN = 1, GETRANGE = 1, HGET = 1, HMGET = 1,
  HGETALL = 1, HEXISTS = 1, HLEN = 1, HKEYS = 1, HVALS = 1, HSTRLEN = 1, HSCAN = 1,
  EXISTS = 1, TYPE = 1, SCAN = 1, SSCAN = 1, ZSCAN = 1, SMEMBERS = 1, SISMEMBER = 1,
  SCARD = 1, LRANGE = 1, LLEN = 1, LINDEX = 1, ZRANGE = 1, ZRANGEBYSCORE = 1,
  ZREVRANGE = 1, ZSCORE = 1, ZCARD = 1, ZCOUNT = 1, ZRANK = 1, KEYS = 1, PING = 1}
local lab_in_place = {HSET = 1, HSETNX = 1, HMSET = 1, HINCRBY = 1, HINCRBYFLOAT = 1,
  INCR = 1, INCRBY = 1, DECR = 1, DECRBY = 1, INCRBYFLOAT = 1, APPEND = 1, SETRANGE = 1,
  SADD = 1, ZADD = 1, ZINCRBY = 1, LPUSH = 1, RPUSH = 1}
local lab_shape = {HSET = 'hash', HSETNX = 'hash', HMSET = 'hash', HINCRBY = 'hash',
  HINCRBYFLOAT = 'hash', HDEL = 'hash', INCR = 'string', INCRBY = 'string',
  DECR = 'string', DECRBY = 'string', INCRBYFLOAT = 'string', APPEND = 'string',
  SETRANGE = 'string', SET = 'string', SETNX = 'string', GETSET = 'string'}
local lab_field_args = {HSET = 2, HMSET = 2, HSETNX = 0, HINCRBY = 0, HINCRBYFLOAT = 0,
  HDEL = 1}
local lab_shrinking = {HDEL = 1, SREM = 1, ZREM = 1, LREM = 1, LPOP = 1, RPOP = 1, SPOP = 1}
local lab_counting = {INCR = 1, INCRBY = 1, DECR = 1, DECRBY = 1, INCRBYFLOAT = 1}
local lab_refused = {TTL = 1, PTTL = 1, EXPIRETIME = 1, PEXPIRETIME = 1, EXPIREAT = 1,
  PEXPIREAT = 1, GETEX = 1, TIME = 1, PERSIST = 0}
local lab_keyless = {PING = 1, TIME = 1, ECHO = 1}
local lab_all_keys = {DEL = 1, EXISTS = 1, MGET = 1, UNLINK = 1, TOUCH = 1}
local lab_paired_keys = {MSET = 1, MSETNX = 1}
"""

# The shim's functions, built once per compiled shim (per load of a Functions
# library, per fakeredis server), not per call. What one call knows lives in
# the state variables below, which every call starts afresh (_SHIM_START):
# scripts never run inside one another, so one set serves them all.
_SHIM_FUNCTIONS = r"""
local lab_observe, lab_server, lab_ttls, lab_touched, lab_calls, lab_declared
local lab_written, lab_reshaped, lab_kind, lab_fields
-- What the shim itself knows of a key, so the tail need not ask the server:
-- the TTL state it left a key in (until any later write to it), and the
-- values the body's own hash verbs left in a hash's fields (a value it could
-- not see, such as HINCRBY's, is lab_unknown; a key whose fields something
-- else may have changed has lab_values[key] == false).
local lab_known, lab_values
local lab_unknown = {}
-- A string counter's value as the body's last INCR-like verb answered it.
local lab_strings
-- Keys a verb may have emptied (and so deleted) without touching their TTL.
local lab_shrunk
-- Whether a key exists after the body, once the tail has asked.
local lab_exists
-- The declared keys the command being run is the first to write.
local lab_fresh

local function lab_note(key, ttl_ms)
  lab_ttls[#lab_ttls + 1] = key
  lab_ttls[#lab_ttls + 1] = ttl_ms
  lab_touched[#lab_touched + 1] = key
  lab_known[key] = ttl_ms > 0 and 1 or -2
end

local function lab_expire(key, ttl_ms)
  -- Each call answers whether the key existed, so no EXISTS goes first.
  if ttl_ms <= 0 then
    if lab_server.call('DEL', key) == 0 then return 0 end
    lab_values[key] = false
    -- Deleted: the key's content is no longer what its other verbs say.
    if lab_declared[key] then lab_kind[key] = 'other' end
    lab_note(key, -1)
    return 1
  end
  if lab_server.call('PEXPIRE', key, SENTINEL) == 0 then return 0 end
  lab_note(key, ttl_ms)
  return 1
end

local function lab_remember(verb, args)
  -- After a hash verb succeeded: the values it left in the fields it named.
  local values = lab_values[args[2]]
  if values == nil then
    values = {}
    lab_values[args[2]] = values
  elseif values == false then
    return
  end
  if verb == 'HDEL' then
    for index = 3, #args do values[args[index]] = false end
  elseif verb == 'HSET' or verb == 'HMSET' then
    for index = 3, #args, 2 do
      local value = args[index + 1]
      -- Only a string is stored as given; a number is converted by the server.
      if type(value) == 'string' then values[args[index]] = value
      else values[args[index]] = lab_unknown end
    end
  else
    values[args[3]] = lab_unknown
  end
end

-- The body's own commands go by pcall, so an error arrives as the reply
-- Redis gives ({err = ...}) on every backend; lab_checked raises it again. (A
-- Redis Function on fakeredis raises a Python error whose text is not Redis's.)
local function lab_failed(reply)
  return type(reply) == 'table' and reply.err ~= nil
end

-- Valkey words some refusals of a script's command otherwise than Redis 7;
-- the lab answers Redis's words on every server, so a store's replies (and
-- the cluster refusals the lab counts by their words) do not depend on which
-- server ran them.
local lab_redis_words = {
  ['ERR Attempted to access a non local key in a cluster node'] =
    'ERR Script attempted to access a non local key in a cluster node',
  ['ERR Wrong number of args calling command from script'] =
    'ERR Wrong number of args calling Redis command from script',
  ['ERR Unknown command called from script'] = 'ERR Unknown Redis command called from script',
  ['ERR This Valkey command is not allowed from script'] =
    'ERR This Redis command is not allowed from script',
}

local function lab_worded(reply)
  if lab_failed(reply) and lab_redis_words[reply.err] ~= nil then
    return lab_server.error_reply(lab_redis_words[reply.err])
  end
  return reply
end

local function lab_set(args)
  local plain = {'SET', args[2], args[3]}
  local ttl_ms = nil
  local index = 4
  while index <= #args do
    local option = string.upper(args[index])
    if option == 'EX' or option == 'PX' then
      ttl_ms = tonumber(args[index + 1])
      if option == 'EX' then ttl_ms = ttl_ms * 1000 end
      index = index + 2
    elseif option == 'NX' or option == 'XX' or option == 'KEEPTTL' then
      plain[#plain + 1] = option
      index = index + 1
    else
      return lab_server.error_reply('ERR the lab does not model SET option ' .. option)
    end
  end
  local reply = lab_worded(lab_server.pcall(unpack(plain)))
  if lab_failed(reply) then return reply end
  if ttl_ms ~= nil and reply then
    lab_server.call('PEXPIRE', args[2], SENTINEL)
    lab_note(args[2], ttl_ms)
  end
  return reply
end

-- On a cluster's node (lab_node: the script's slot; the node's first and
-- last slots; a slot it serves besides, one it no longer serves, and one it
-- is migrating away, each -1 for none), a command may use a key the script
-- did not declare only in the script's slot, as Redis 7 checks each command
-- of a function: another node's slot, or another slot of this node, fails
-- the command; and while a slot migrates, its old node fails a command on
-- any of its keys no longer there (Redis would redirect it to the new node).
local lab_node
local lab_crc_table

local function lab_xor16(a, b)
  -- Lua 5.1 has no bit operators (fakeredis has no bit library): bit by bit.
  local result, place = 0, 1
  for _ = 1, 16 do
    local x, y = a % 2, b % 2
    if x ~= y then result = result + place end
    a, b, place = (a - x) / 2, (b - y) / 2, place * 2
  end
  return result
end

local function lab_slot(key)
  -- CRC16 (XMODEM) of the hash tag, or of the whole key, modulo 16384.
  if lab_crc_table == nil then
    lab_crc_table = {}
    for byte = 0, 255 do
      local crc = byte * 256
      for _ = 1, 8 do
        if crc >= 32768 then crc = lab_xor16((crc * 2) % 65536, 4129)
        else crc = (crc * 2) % 65536 end
      end
      lab_crc_table[byte] = crc
    end
  end
  local open = string.find(key, '{', 1, true)
  if open ~= nil then
    local close = string.find(key, '}', open + 1, true)
    if close ~= nil and close > open + 1 then key = string.sub(key, open + 1, close - 1) end
  end
  local crc = 0
  for index = 1, #key do
    local high = (crc - crc % 256) / 256
    crc = lab_xor16((crc * 256) % 65536, lab_crc_table[lab_xor16(high, string.byte(key, index))])
  end
  return crc % 16384
end

local function lab_misplaced(verb, args)
  -- The error Redis answers for the first key out of place, or nil: on a
  -- migrating slot's old node, any key of that slot no longer there (Redis
  -- would ask the new node: not local); elsewhere an undeclared key in a slot
  -- this node does not serve, or in another slot than the script's.
  if lab_keyless[verb] then return nil end
  local last, step = 2, 1
  if lab_all_keys[verb] then last = #args elseif lab_paired_keys[verb] then
    last, step = #args, 2 end
  for index = 2, last, step do
    local key = args[index]
    if key ~= nil then
      local slot = -1
      if lab_node[6] ~= -1 then
        slot = lab_slot(key)
        if slot == lab_node[6] and lab_server.call('EXISTS', key) == 0 then
          return lab_server.error_reply(
            'ERR Script attempted to access a non local key in a cluster node')
        end
      end
      if not lab_declared[key] then
        if slot == -1 then slot = lab_slot(key) end
        if (slot < lab_node[2] or slot > lab_node[3] or slot == lab_node[5])
            and slot ~= lab_node[4] then
          return lab_server.error_reply(
            'ERR Script attempted to access a non local key in a cluster node')
        end
        if lab_node[1] == -1 then lab_node[1] = slot
        elseif slot ~= lab_node[1] then
          return lab_server.error_reply(
            'ERR Script attempted to access keys that do not hash to the same slot')
        end
      end
    end
  end
  return nil
end

local function lab_run(...)
  lab_calls = lab_calls + 1
  local args = {...}
  local verb = string.upper(args[1])
  if lab_node ~= nil then
    local refused = lab_misplaced(verb, args)
    if refused ~= nil then return refused end
  end
  if lab_reads[verb] == nil then
    -- Any other verb may write: every declared key among its arguments counts.
    -- One that may delete or overwrite a key may also have dropped its TTL;
    -- the shape of the verbs used says which read gives the key's state.
    for index = 2, #args do
      local key = args[index]
      lab_known[key] = nil
      lab_strings[key] = nil
      if lab_declared[key] then
        if not lab_written[key] then lab_fresh[#lab_fresh + 1] = key end
        lab_written[key] = true
        -- A shrinking verb may delete the key, but leaves its TTL alone; a
        -- later write may re-create the key without one, so it reshapes.
        if lab_shrinking[verb] then lab_shrunk[key] = true
        elseif lab_in_place[verb] == nil or lab_shrunk[key] then lab_reshaped[key] = true end
        -- A TTL changes no content: it leaves the key's shape as it was.
        if verb ~= 'PEXPIRE' and verb ~= 'EXPIRE' then
          local shape = lab_shape[verb] or 'other'
          if lab_kind[key] == nil then lab_kind[key] = shape
          elseif lab_kind[key] ~= shape then lab_kind[key] = 'other' end
        end
      end
    end
    -- The fields a hash verb names: their values are all that can have changed.
    local step = lab_field_args[verb]
    if step == nil and verb ~= 'PEXPIRE' and verb ~= 'EXPIRE' then
      for index = 2, #args do
        if lab_declared[args[index]] then lab_values[args[index]] = false end
      end
    end
    if step ~= nil and lab_declared[args[2]] then
      local fields = lab_fields[args[2]]
      if fields == nil then
        fields = {}
        lab_fields[args[2]] = fields
      end
      local last = step == 0 and 3 or #args
      for index = 3, last, step == 2 and 2 or 1 do
        if fields[args[index]] == nil then
          fields[args[index]] = true
          fields[#fields + 1] = args[index]
        end
      end
    end
  end
  if verb == 'PEXPIRE' or verb == 'EXPIRE' then
    if args[4] ~= nil then
      return lab_server.error_reply('ERR the lab does not model ' .. verb .. ' options')
    end
    local ttl_ms = tonumber(args[3])
    if verb == 'EXPIRE' then ttl_ms = ttl_ms * 1000 end
    return lab_expire(args[2], ttl_ms)
  elseif verb == 'SET' then
    return lab_set(args)
  elseif verb == 'SETEX' or verb == 'PSETEX' then
    local ttl_ms = tonumber(args[3])
    if verb == 'SETEX' then ttl_ms = ttl_ms * 1000 end
    return lab_set({'SET', args[2], args[4], 'PX', ttl_ms})
  elseif lab_refused[verb] == 1 then
    return lab_server.error_reply('ERR ' .. verb .. ' inside a script cannot follow virtual time')
  end
  local reply = lab_worded(lab_server.pcall(...))
  if lab_failed(reply) then return reply end
  if lab_field_args[verb] ~= nil and lab_declared[args[2]] then lab_remember(verb, args) end
  if lab_counting[verb] then
    -- An integer reply arrives as a Lua number: exact only below 2^53.
    if type(reply) == 'string' then lab_strings[args[2]] = reply
    elseif math.abs(reply) < 9007199254740992 then
      lab_strings[args[2]] = string.format('%d', reply)
    end
  end
  return reply
end

local function lab_call(...)
  lab_fresh = {}
  local reply = lab_run(...)
  if lab_failed(reply) then
    -- A command that failed wrote nothing: a key no earlier command wrote is
    -- still only read (a batch that stops part-way shows which keys it wrote).
    for index = 1, #lab_fresh do lab_written[lab_fresh[index]] = nil end
  end
  return reply
end

local function lab_checked(...)
  local reply = lab_call(...)
  if lab_failed(reply) then
    error(reply)
  end
  return reply
end

local function lab_pcall(...)
  local ok, reply = pcall(lab_call, ...)
  if ok then return reply end
  if type(reply) == 'table' then return reply end
  return lab_server.error_reply(tostring(reply))
end

local function lab_still_there(key)
  -- (pcall: a migrating slot's old node refuses a key that is not there.)
  if lab_exists[key] == nil then lab_exists[key] = lab_server.pcall('EXISTS', key) == 1 end
  return lab_exists[key]
end

-- The body's redis: the shim's call and pcall, the rest the server's own
-- (looked up per call: a Functions library is loaded with another redis).
-- Built by the first call: a library's load sees no setmetatable.
local lab_proxy
"""

_SHIM_START = r"""
lab_observe = table.remove(ARGV) == '1'
lab_node = table.remove(ARGV)
if lab_node == '' then lab_node = nil else
  local fields = {}
  for field in string.gmatch(lab_node, '-?%d+') do fields[#fields + 1] = tonumber(field) end
  lab_node = fields
end
lab_server = redis
lab_ttls = {}
lab_touched = {}
lab_calls = 0
lab_declared = {}
for index = 1, #KEYS do
  lab_declared[KEYS[index]] = true
end
lab_written = {}
lab_reshaped = {}
lab_kind = {}
lab_fields = {}
lab_known = {}
lab_values = {}
lab_strings = {}
lab_shrunk = {}
lab_exists = {}
if lab_proxy == nil then
  lab_proxy = setmetatable({call = lab_checked, pcall = lab_pcall},
    {__index = function(_, name) return lab_server[name] end})
end
local lab_ok, lab_reply = pcall(lab_body, lab_proxy, KEYS, ARGV)
"""

_SHIM_TAIL = r"""
local lab_states = {}
for index = 1, #KEYS do
  local key = KEYS[index]
  if lab_reshaped[key] then
    lab_touched[#lab_touched + 1] = key
  elseif lab_shrunk[key] and lab_known[key] == nil and not lab_still_there(key) then
    -- Emptied away; a key still there kept whatever TTL it had.
    lab_states[#lab_states + 1] = key
    lab_states[#lab_states + 1] = -2
  end
end
for index = 1, #lab_touched do
  local ttl = lab_known[lab_touched[index]]
  if ttl == nil then
    ttl = lab_server.pcall('PTTL', lab_touched[index])
    if type(ttl) ~= 'number' then ttl = -2 elseif ttl > 0 then ttl = 1 end
  end
  lab_states[#lab_states + 1] = lab_touched[index]
  lab_states[#lab_states + 1] = ttl
end
local lab_seen = {}
if lab_observe then
  for index = 1, #KEYS do
    local key = KEYS[index]
    local seen = nil
    if not lab_written[key] then
      seen = {key, 'same'}
    elseif lab_kind[key] == 'hash' and lab_fields[key] ~= nil then
      -- Written only by hash verbs: the fields they named, as they are now
      -- (false: gone); the lab keeps the rest. No hash is ever empty, so a
      -- hash that lost a field may be gone altogether.
      local names = lab_fields[key]
      local values = nil
      local known = lab_values[key]
      if known then
        values = {}
        for field = 1, #names do
          local value = known[names[field]]
          if value == nil or value == lab_unknown then
            values = nil
            break
          end
          values[field] = value
        end
      end
      if values == nil then values = lab_server.pcall('HMGET', key, unpack(names)) end
      if type(values) == 'table' and values.err == nil then
        local changes = {}
        local removed = false
        for field = 1, #names do
          changes[#changes + 1] = names[field]
          changes[#changes + 1] = values[field]
          removed = removed or not values[field]
        end
        if removed and not lab_still_there(key) then
          seen = {key, 'none'}
        else
          seen = {key, 'fields', changes}
        end
      end
    elseif lab_kind[key] == 'hash' then
      -- Written only by hash verbs: one read says all (no hash is ever empty).
      local value = lab_server.pcall('HGETALL', key)
      if type(value) == 'table' and value.err == nil then
        seen = #value == 0 and {key, 'none'} or {key, 'hash', value}
      end
    elseif lab_kind[key] == 'string' and lab_strings[key] ~= nil then
      seen = {key, 'string', lab_strings[key]}
    elseif lab_kind[key] == 'string' then
      local value = lab_server.pcall('GET', key)
      if type(value) ~= 'table' then
        seen = value and {key, 'string', value} or {key, 'none'}
      end
    end
    local kind = seen == nil and (lab_server.pcall('TYPE', key)['ok'] or 'none') or 'seen'
    if kind == 'seen' then
      lab_seen[#lab_seen + 1] = seen
    elseif kind == 'string' then
      lab_seen[#lab_seen + 1] = {key, kind, lab_server.call('GET', key)}
    elseif kind == 'hash' then
      lab_seen[#lab_seen + 1] = {key, kind, lab_server.call('HGETALL', key)}
    else
      lab_seen[#lab_seen + 1] = {key, kind}
    end
  end
end
if not lab_ok then
  local message = lab_reply
  if type(lab_reply) == 'table' and lab_reply.err then message = lab_reply.err end
  return {2, lab_calls, lab_ttls, lab_states, lab_seen, tostring(message)}
end
if type(lab_reply) == 'table' and lab_reply.err then
  return {2, lab_calls, lab_ttls, lab_states, lab_seen, lab_reply.err}
end
if lab_reply == nil or lab_reply == false then
  return {0, lab_calls, lab_ttls, lab_states, lab_seen}
end
return {1, lab_calls, lab_ttls, lab_states, lab_seen, lab_reply}
"""


SHIM_LIBRARY = (_SHIM_CONSTANTS + _SHIM_FUNCTIONS.replace("SENTINEL", str(SENTINEL_TTL_MS))
                + "return function(lab_body, KEYS, ARGV)\n" + _SHIM_START + _SHIM_TAIL
                + "end\n")
"""The shim as a Lua chunk returning one function of ``(lab_body, KEYS,
ARGV)``: it runs ``lab_body`` (the store's script, ``as_function``) on the
script's keys and arguments and returns the packed reply. KEYS and ARGV are
parameters, not globals, because a Redis function receives them so (see
``functions_library``); a script passes its globals along. The same code
serves every way of running a script: ``wrap``, ``wrap_preloaded`` and the
Functions library."""

PRELOADED_SHIM = "lab_virtual_expiry"
"""The name under which a backend may hold the shim already compiled (``wrap_preloaded``)."""


def as_function(body: str) -> str:
    """A store's script ``body`` as a Lua function expression: it sees the
    shim's ``redis`` and the script's KEYS and ARGV as its own locals."""
    return f"function(redis, KEYS, ARGV)\n{body}\nend"


def shim_expression() -> str:
    """A Lua expression whose value is the shim's function."""
    return f"(function()\n{SHIM_LIBRARY}end)()"


def wrap(body: str) -> str:
    """The store's script ``body``, run inside the virtual-expiry shim: one
    self-contained script (a real server compiles it once, at SCRIPT LOAD)."""
    return (f"local lab_shim = {shim_expression()}\n"
            f"return lab_shim({as_function(body)}, KEYS, ARGV)")


def wrap_preloaded(body: str) -> str:
    """The same, calling the shim a backend preloaded (``PRELOADED_SHIM``):
    fakeredis compiles every script on every call, so a small script is a
    fast one there."""
    return f"return {PRELOADED_SHIM}({as_function(body)}, KEYS, ARGV)"


GENERIC_COMMAND = "return redis.call(unpack(ARGV))"
"""The body a plain (non-script) command runs in, so every command, scripted
or not, passes through the same shim and the same bookkeeping."""


class VirtualExpiry:
    """The deadlines of keys, in virtual microseconds."""

    def __init__(self) -> None:
        self._deadline_us: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self._deadline_us)

    def deadline_us(self, key: str) -> int | None:
        return self._deadline_us.get(key)

    def arm(self, key: str, deadline_us: int) -> None:
        self._deadline_us[key] = deadline_us
        heapq.heappush(self._heap, (deadline_us, key))

    def forget(self, key: str) -> None:
        self._deadline_us.pop(key, None)

    def any_due(self, now_us: int) -> bool:
        """Whether a deadline (perhaps since superseded) has been reached."""
        return bool(self._heap) and self._heap[0][0] <= now_us

    def due(self, now_us: int) -> list[str]:
        """Keys whose deadline has been reached, removed from the table."""
        heap = self._heap
        expired: list[str] = []
        while heap and heap[0][0] <= now_us:
            deadline_us, key = heapq.heappop(heap)
            # Entries superseded by a later arm/forget are skipped here.
            if self._deadline_us.get(key) == deadline_us:
                del self._deadline_us[key]
                expired.append(key)
        return expired

    def apply(self, now_us: int, ttl_pairs: list, key_states: list) -> None:
        """Record what one wrapped script reported: the TTLs it set, then the
        state each touched key was left in."""
        for index in range(0, len(ttl_pairs), 2):
            key, ttl_ms = ttl_pairs[index], int(ttl_pairs[index + 1])
            if ttl_ms > 0:
                self.arm(key, now_us + ttl_ms * 1_000)
            else:
                self.forget(key)
        for index in range(0, len(key_states), 2):
            if int(key_states[index + 1]) != KEY_SENTINEL:
                self.forget(key_states[index])
