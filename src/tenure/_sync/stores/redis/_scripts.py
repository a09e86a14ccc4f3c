# GENERATED from src/tenure/_async/stores/redis/_scripts.py by scripts/unasync.py: do not edit.
"""The Lua scripts of the Redis store, the keys of a name, and commands packed by hand.

Every name has keys of its own that share one hash tag, `{<readable prefix>-<digest>}` (see
tenure._names.safe_key; it never contains a brace), so each script touches one cluster slot:

    <prefix>{<tag>}:s<slot>   the lease of a slot: a JSON array [lease id, token, holder, name]
                              with a PX expiry (PTTL is the time left, by the server's clock)
    <prefix>{<tag>}:token     the name's fencing counter; with a finite `retain` it expires
                              `retain` after the last live slot (see KEEP), else it stays
    <prefix>{<tag>}:limit     the largest semaphore limit used (semaphores only; for breaks),
                              kept as long as the counter
    <prefix>{<tag>}:b<slot>   left by break_lease for the broken lease's remaining time, so its
                              holder's next renewal reports BROKEN rather than EXPIRED
    <prefix>{<tag>}:signal    a list a release pushes one item onto (for 2 s): a waiter blocked
                              on it wakes at once, one waiter per release
    <prefix>{<tag>}:w<store>  a store's own list a waiter's BLMOVE moves the signal into
    <prefix>{<tag>}:x<id>     left by UNDO_ACQUIRE (for the ttl) when it found nothing to free:
                              an ACQUIRE of lease id <id> still on its way takes nothing
    <prefix>{<tag>}:record    the name's record (records API): JSON [name, token, seq, record];
                              never expires, written only while the writer's lease is live
    <prefix>live              the store's index of live slots: a sorted set of slot keys by
                              their expiry (server ms), so a listing reads the live leases only
                              (entries of expired slots are dropped by one ACQUIRE in 16). It is
                              a key of its own: the scripts touch it next to the name's keys, so
                              they are not single-slot for Redis Cluster

Each script runs with EVALSHA (the store loads it when the server lacks it).

Example:
    >>> name_keys("tenure:", "jobs").counter
    'tenure:{jobs-65177a560cada1f767891398e66c46de}:token'
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import NamedTuple

from tenure._names import safe_key
from tenure._types import LostReason

# A release's wake-up item stays this long for a waiter that was not blocked yet (the scripts
# say 2000 too).
SIGNAL_MS = 2000

# Renewal answers of the RENEW script, as reasons of a loss.
LOST = {0: LostReason.EXPIRED, 2: LostReason.TAKEN, 3: LostReason.BROKEN}

# Shared by the scripts below (prepended): how long the server keeps a name's counter and
# semaphore limit. While a slot of the name is live, and `retain` ms after the last one ends,
# counted from when the server's clock passes the counter (a counter ahead of the clock, e.g.
# raised by a quorum, is kept that much longer): so a name is forgotten only once the clock is
# past every token it gave, and its next token, from the clock, is larger. retain < 0 (inf):
# kept forever, as before the option. PEXPIRE of 0 deletes at once (retain=0: forgotten at
# release).
KEEP = """
local function now_us()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end
local function index_of(key)
  return string.match(key, '^(.-){') .. 'live'
end
-- the most ms a slot of the name has left, of its `n` slots but the key `skip`
local function longest(base, n, skip)
  local most = 0
  for slot = 0, n - 1 do
    local key = base .. 's' .. slot
    if key ~= skip then
      local left = redis.call('PTTL', key)
      if left > most then most = left end
    end
  end
  return most
end
local function keep_ms(retain, counter, now, most)
  return retain + math.max(most, math.ceil((counter - now) / 1000), 0)
end
-- sets the expiry of the counter (and of the limit, when there is one); `skip` is a slot key
-- known to be free. With `restore`, a counter the server lost is written back as 0 (the next
-- token comes from the clock; see RELEASE).
local function keep(base, retain, skip, restore)
  local key = base .. 'token'
  local counter = redis.call('GET', key)
  if not counter and not restore then return end
  if retain < 0 then
    if not counter then redis.call('SET', key, '0') end
    return
  end
  local limit = redis.call('GET', base .. 'limit')
  local ms = keep_ms(retain, tonumber(counter or '0'), now_us(),
                     longest(base, tonumber(limit or '1'), skip))
  if counter then
    redis.call('PEXPIRE', key, ms)
  elseif ms > 0 then
    redis.call('SET', key, '0', 'PX', ms)
  end
  if limit then redis.call('PEXPIRE', base .. 'limit', ms) end
end
"""

# Shared by the acquiring scripts below (prepended, after KEEP): the checks before a grant
# and the grant itself.
GRANT = KEEP + """
-- a request that was given up before it ran (see UNDO_ACQUIRE) takes nothing
local function given_up(base, head)
  return redis.call('EXISTS', base .. 'x' .. string.sub(head, 3, -3)) == 1
end
-- Never granted on this server, or the server lost its data: in the server's first seconds,
-- wait, so that holders from before a restart can reclaim their leases first. INFO's uptime is
-- wall-clock time since the start, negative once that clock stepped back by more: then nobody
-- can tell, and waiting would refuse every new name until the clock catches up.
local function in_restart_grace(grace)
  local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(-?%d+)'))
  return up and up >= 0 and up < tonumber(grace)
end
-- the token of a lease value (what a retry of its own request finds)
local function token_of(value)
  return tonumber(string.match(value, '^[^,]*,(%d+)'))
end
-- writes the free slot `key` of the name at `base` for `ttl` ms; `counter` is the value of
-- its counter key `counter_key` (false: none). Returns the token (a string): the server's
-- clock in microseconds, or the counter + 1 when that is ahead.
local function grant(base, key, counter_key, counter, limit, value_head, value_tail, ttl, retain)
  local now = redis.call('TIME')
  local token = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
  local clock = tonumber(token)
  if counter and tonumber(counter) >= clock then
    token = string.format('%d', tonumber(counter) + 1)
  end
  redis.call('SET', key, value_head .. token .. value_tail, 'PX', ttl)
  -- the highest limit: a lock's name may have been a semaphore's too
  local highest = redis.call('GET', base .. 'limit')
  if limit > tonumber(highest or '1') then
    redis.call('SET', base .. 'limit', limit)
    highest = limit
  end
  if retain < 0 then
    redis.call('SET', counter_key, token)
  else  -- see KEEP
    local ms = keep_ms(retain, tonumber(token), clock,
                       math.max(ttl, longest(base, tonumber(highest or '1'), key)))
    redis.call('SET', counter_key, token, 'PX', ms)
    if highest then redis.call('PEXPIRE', base .. 'limit', ms) end
  end
  local index, ms = index_of(key), math.floor(clock / 1000)
  -- the entries of slots that expired unreleased, at one acquire in 16 (by the clock's last
  -- digits): a listing never reads them (it starts from the clock), they only take room
  if clock % 16 == 0 then redis.call('ZREMRANGEBYSCORE', index, '-inf', ms) end
  redis.call('ZADD', index, ms + ttl, key)
  return token
end
"""

# KEYS: slot 0, counter, and for a semaphore its highest limit. ARGV: limit, ttl ms, value head
# '["<lease id>",', value tail ',"<holder>","<name>"]', restart grace s, retain ms (-1: inf).
# Takes the first free slot; returns the token for a lock, {slot, token} for a semaphore, false
# when all are held (or when UNDO_ACQUIRE of this lease id came first). A name forgotten (after
# `retain`, or by PRUNE) has no counter: its token comes from the clock, above every earlier
# one; the restart grace refuses it only in the server's first seconds.
ACQUIRE = GRANT + """
local limit, head = tonumber(ARGV[1]), ARGV[3]
local base = string.sub(KEYS[1], 1, -3)
local key, free
for slot = 0, limit - 1 do
  key = slot == 0 and KEYS[1] or base .. 's' .. slot
  local value = redis.call('GET', key)
  if not value then free = slot break end
  if string.sub(value, 1, #head) == head then
    -- this very request, retried after its reply was lost: the same grant again
    local token = token_of(value)
    if limit == 1 then return token end
    return {slot, token}
  end
end
if not free then return false end
if given_up(base, head) then return false end
local counter = redis.call('GET', KEYS[2])
if not counter and in_restart_grace(ARGV[5]) then return false end
local token = grant(base, key, KEYS[2], counter, limit, head, ARGV[4], tonumber(ARGV[2]),
                    tonumber(ARGV[6]))
if limit == 1 then return tonumber(token) end
return {free, token}
"""

# A lock (slot 0) on each of several names, or on none. KEYS: slot 0 and counter of each name,
# in pairs. ARGV: ttl ms, restart grace s, retain ms (-1: inf), then each name's value head and
# value tail, in pairs. Returns the tokens in the names' order, or false when one of the names
# is held (or given up, or refused by the restart grace): then nothing is written.
ACQUIRE_ALL = GRANT + """
local ttl, grace, retain = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local tokens, counters, graced = {}, {}, false
for i = 1, #KEYS / 2 do
  local key, head = KEYS[2 * i - 1], ARGV[2 * i + 2]
  local value = redis.call('GET', key)
  if value then
    -- held: by this very request, retried after its reply was lost, or by another lease
    if string.sub(value, 1, #head) ~= head then return false end
    tokens[i] = token_of(value)
  else
    if given_up(string.sub(key, 1, -3), head) then return false end
    counters[i] = redis.call('GET', KEYS[2 * i])
    if not counters[i] and not graced then
      if in_restart_grace(grace) then return false end
      graced = true
    end
  end
end
for i = 1, #KEYS / 2 do
  if not tokens[i] then
    local key = KEYS[2 * i - 1]
    tokens[i] = tonumber(grant(string.sub(key, 1, -3), key, KEYS[2 * i], counters[i] or false,
                               1, ARGV[2 * i + 2], ARGV[2 * i + 3], ttl, retain))
  end
end
return tokens
"""

# ACQUIRE for a waiter, sent right behind its BLMOVE of the name's signal list into a list of the
# waiter's store's own (the last key): it runs as soon as a release woke the waiter, in the same
# server turn, and only then (-1 when the BLMOVE timed out).
WAKE_ACQUIRE = "if not redis.call('LPOP', KEYS[#KEYS]) then return -1 end\n" + ACQUIRE
# The same behind the last BLMOVE of a wait: it acquires whether or not a release woke the
# waiter (a wait ends with a try), and saves the try's own round trip.
LAST_ACQUIRE = "redis.call('LPOP', KEYS[#KEYS])\n" + ACQUIRE

# KEYS: the slot keys of the leases. ARGV: ttl ms, retain ms (-1: inf), then each lease's
# value. One answer per lease: 1 renewed, 2 taken by another lease, 3 broken, 0 expired.
#
# A lease whose key is gone, with no tombstone on its slot and no counter, is written back and
# kept: the server lost its data (a restart without persistence, a failover), and nothing of
# that name was granted since (a grant sets the counter, and the restart grace keeps new grants
# off while holders reclaim). With `retain`, "no counter" can also mean "forgotten": the
# counter outlives every live slot by `retain` (KEEP), so then the lease ended (expired,
# released or broken) at least `retain` ago, and a later grant may have come and been forgotten
# too. Writing it back is still harmless: an expired lease's holder passed its own deadline
# before the server's expiry (the deadline counts from when the renewal was sent, with a
# margin), and a lease that is lost stays lost however late a renewal answers; a released one
# is no longer held by its store, which frees it again at once (RedisStore.renew); a
# broken one keeps a tombstone on its slot for as long as any lease broken there could still
# be renewed (BREAK keeps the longest), and a tombstone forbids the write-back. So no lease
# written back has a holder that acts, and no smaller token acts after a larger one.
RENEW = KEEP + """
local answers = {}
local retain, now, index = tonumber(ARGV[2]), nil, nil
for i, key in ipairs(KEYS) do
  local mine = ARGV[i + 2]
  local value = redis.call('GET', key)
  local base, slot = string.match(key, '^(.*:)s(%d+)$')
  local kept = false
  if value == mine then
    redis.call('PEXPIRE', key, ARGV[1])
    kept = true
  elseif value then
    answers[i] = 2
  else
    local tombstone = redis.call('GET', base .. 'b' .. slot)
    if tombstone == mine then
      answers[i] = 3
    elseif not tombstone and redis.call('EXISTS', base .. 'token') == 0 then
      redis.call('SET', key, mine, 'PX', ARGV[1])
      kept = true
    else
      answers[i] = 0
    end
  end
  if kept then
    answers[i] = 1
    now = now or now_us()
    index = index or index_of(key)
    redis.call('ZADD', index, math.floor(now / 1000) + tonumber(ARGV[1]), key)
    if retain >= 0 then
      -- the counter outlives this slot by retain (never shortened here: other slots)
      local left, ms = redis.call('PTTL', base .. 'token'), tonumber(ARGV[1]) + retain
      if left >= 0 and left < ms then
        redis.call('PEXPIRE', base .. 'token', ms)
        redis.call('PEXPIRE', base .. 'limit', ms)
      end
    end
  end
end
return answers
"""

# KEYS: slot key, counter. ARGV: the lease's value, retain ms (-1: inf). Compare-and-delete,
# then wake one waiter (see `signal` above). A counter the server lost is written back first
# (as 0: the next token comes from the clock), so that no renewal still on its way can bring
# the released lease back (see RENEW); then the counter is kept `retain` more (KEEP).
RELEASE = KEEP + """
local base, freed = string.sub(KEYS[2], 1, -6), 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', index_of(KEYS[1]), KEYS[1])
  local signal = base .. 'signal'
  if redis.call('RPUSH', signal, 1) > 1 then redis.call('LTRIM', signal, -1, -1) end
  redis.call('PEXPIRE', signal, 2000)  -- SIGNAL_MS
  freed = 1
end
keep(base, tonumber(ARGV[2]), KEYS[1], true)
return freed
"""

# KEYS: slot 0. ARGV: limit, value head '["<lease id>",', ttl ms, retain ms (-1: inf). Frees
# the slot an ACQUIRE of this lease id took, if any, and wakes a waiter (its caller gave up on
# the answer: cancelled, or timed out); when it took none, leaves the mark `x<lease id>` for
# the ttl, so that the ACQUIRE takes nothing if it is still on its way (on another connection,
# it may come second).
UNDO = KEEP + """
-- frees the slot of the name at slot 0 `first` that holds lease `head` (1), or leaves a mark
-- that an ACQUIRE of that lease id still on its way takes nothing (0)
local function undo(first, limit, head, ttl, retain)
  local base = string.sub(first, 1, -3)
  for slot = 0, limit - 1 do
    local key = slot == 0 and first or base .. 's' .. slot
    local value = redis.call('GET', key)
    if value and string.sub(value, 1, #head) == head then
      redis.call('DEL', key)
      redis.call('ZREM', index_of(key), key)
      keep(base, retain, key, false)
      local signal = base .. 'signal'
      if redis.call('RPUSH', signal, 1) > 1 then redis.call('LTRIM', signal, -1, -1) end
      redis.call('PEXPIRE', signal, 2000)  -- SIGNAL_MS
      return 1
    end
  end
  redis.call('SET', base .. 'x' .. string.sub(head, 3, -3), '1', 'PX', ttl)
  return 0
end
"""
UNDO_ACQUIRE = UNDO + """
return undo(KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4] or '-1'))
"""

# KEYS: slot 0 of each name. ARGV: ttl ms, retain ms (-1: inf), then each name's value head.
# UNDO_ACQUIRE of an ACQUIRE_ALL: each name freed or marked.
UNDO_ALL = UNDO + """
for i, first in ipairs(KEYS) do
  undo(first, 1, ARGV[i + 2], ARGV[1], tonumber(ARGV[2]))
end
return #KEYS
"""

# KEYS: slot 0, highest limit, counter. ARGV: retain ms (-1: inf). Frees every slot (the
# counter stays, for `retain`) and wakes a waiter per slot freed; a tombstone with the lease's
# remaining time lets its holder's next renewal report BROKEN. A tombstone already there (an
# earlier lease broken on that slot) is kept at least as long as it had left: while it lasts,
# no renewal of a broken lease is written back (see RENEW).
BREAK = KEEP + """
local base = string.sub(KEYS[1], 1, -3)
local freed = 0
for slot = 0, tonumber(redis.call('GET', KEYS[2]) or '1') - 1 do
  local key = slot == 0 and KEYS[1] or base .. 's' .. slot
  local value = redis.call('GET', key)
  if value then
    local left = redis.call('PTTL', key)
    local before = redis.call('PTTL', base .. 'b' .. slot)
    redis.call('DEL', key)
    redis.call('ZREM', index_of(key), key)
    redis.call('SET', base .. 'b' .. slot, value, 'PX', math.max(left, before, 1))
    freed = freed + 1
  end
end
keep(base, tonumber(ARGV[1] or '-1'), '', true)  -- the counter written back as in RELEASE
if freed > 0 then
  redis.call('DEL', base .. 'signal')
  for _ = 1, freed do redis.call('RPUSH', base .. 'signal', 1) end
  redis.call('PEXPIRE', base .. 'signal', 2000)  -- SIGNAL_MS
end
return freed
"""

# KEYS: counter, slot key. ARGV: a token, retain ms (-1: inf), the lease's value, the value with
# the token. Raises the counter to the token when it is behind (quorum mode: every master that
# granted a lease learns the lease's token, the largest of their counters), kept as KEEP says
# (longer by as much as it is now ahead of this clock), and gives this master's part of the
# lease that token, keeping its expiry, as RETOKEN does: so a quorum of masters lists the
# lease with the token its holder has. 1 when the lease was retokened, 0 when it is gone.
RAISE = KEEP + """
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  keep(string.sub(KEYS[1], 1, -6), tonumber(ARGV[2] or '-1'), '', false)
end
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[2], ARGV[4], 'PX', math.max(redis.call('PTTL', KEYS[2]), 1))
return 1
"""

# KEYS: slot key. ARGV: the lease's value, the value with another token. Gives a live lease
# another token, keeping its expiry (quorum mode: a master's late grant joins its lease with the
# lease's token); 1 when done.
RETOKEN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', math.max(redis.call('PTTL', KEYS[1]), 1))
return 1
"""

# KEYS: slot key, record. ARGV: the lease's value, the new record. Writes only while the lease is
# live; 1 when written.
WRITE_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

# As WRITE_RECORD, for the quorum store: returns the record it replaced ('' when none), or nil
# when the lease is not live, so a write that misses its quorum can be undone.
SWAP_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return nil end
local old = redis.call('GET', KEYS[2]) or ''
redis.call('SET', KEYS[2], ARGV[2])
return old
"""

# KEYS: record. ARGV: the record written, the one it replaced. Puts the old one back unless the
# record changed since.
UNDO_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""

# KEYS: slot keys. Returns value and PTTL of each ('' and -2 when gone).
READ = """
local found = {}
for i, key in ipairs(KEYS) do
  found[2 * i - 1] = redis.call('GET', key) or ''
  found[2 * i] = redis.call('PTTL', key)
end
return found
"""

# KEYS: the store's index (`live`). ARGV: a slot key prefix, the lowest expiry (ms) to read
# from ('' at first: the server's clock), how many entries at that expiry were read already, at
# most how many entries to read. One page of the live slots by expiry: {the last entry's
# expiry, how many entries of the page have it, entries read, then key, value, PTTL of each
# live slot whose key starts with the prefix}. Expired entries are never read.
LIST = KEEP + """
local from = ARGV[2]
if from == '' then from = tostring(math.floor(now_us() / 1000) + 1) end
local page = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'WITHSCORES', 'LIMIT',
                        ARGV[3], ARGV[4])
local found, last, ties = {'', 0, #page / 2}, from, 0
for i = 1, #page, 2 do
  local key, score = page[i], page[i + 1]
  if score == last then ties = ties + 1 else last, ties = score, 1 end
  if string.sub(key, 1, #ARGV[1]) == ARGV[1] then
    local value = redis.call('GET', key)
    if value then
      found[#found + 1] = key
      found[#found + 1] = value
      found[#found + 1] = redis.call('PTTL', key)
    end
  end
end
found[1], found[2] = last, ties
return found
"""

# KEYS: counters of names. ARGV: idle µs, '1' for a dry run. Forgets (deletes the counter and
# the semaphore limit of) each name with no live slot whose counter is below the server's clock
# minus `idle`: a token is at least the clock at its grant, so the name was not granted for
# `idle`, and its next token, from the clock, is larger than the counter. Records stay. In one
# script: a grant either came first (a live slot, a fresh counter) or finds the name forgotten.
# Returns the counters of the names it forgot (would forget).
PRUNE = KEEP + """
-- whether a slot of the name's `n` is held: its key exists, also in its last millisecond (PTTL
-- 0), when ACQUIRE, which reads the key, still finds the slot taken
local function held(base, n)
  for slot = 0, n - 1 do
    if redis.call('EXISTS', base .. 's' .. slot) == 1 then return true end
  end
  return false
end
local before, forgotten = now_us() - tonumber(ARGV[1]), {}
for _, key in ipairs(KEYS) do
  local counter = tonumber(redis.call('GET', key) or '')
  local base = string.sub(key, 1, -6)
  if counter and counter < before
      and not held(base, tonumber(redis.call('GET', base .. 'limit') or '1')) then
    forgotten[#forgotten + 1] = key
    if ARGV[2] ~= '1' then redis.call('DEL', key, base .. 'limit') end
  end
end
return forgotten
"""


class Script(NamedTuple):
    """A script's text and its SHA-1 (what EVALSHA names it by)."""

    text: bytes
    sha: bytes


def _script(text: str) -> Script:
    return Script(text.encode(), hashlib.sha1(text.encode()).hexdigest().encode())


def bulk(arg: bytes) -> bytes:
    """One argument of a command in the Redis protocol.

    Example:
        >>> bulk(b"GET")
        b'$3\\r\\nGET\\r\\n'
    """
    return b"$%d\r\n%s\r\n" % (len(arg), arg)


def packed(*args: bytes) -> bytes:
    """A command in the Redis protocol (RESP), ready to send.

    Example:
        >>> packed(b"GET", b"k")
        b'*2\\r\\n$3\\r\\nGET\\r\\n$1\\r\\nk\\r\\n'
    """
    return b"*%d\r\n" % len(args) + b"".join(map(bulk, args))


def evalsha(script: Script, keys: Sequence[bytes], *args: bytes) -> bytes:
    """EVALSHA of `script` with `keys` and `args`, packed (see `packed`).

    Example:
        >>> evalsha(SCRIPTS.read, [b"k"]).count(b"\\r\\n")
        9
    """
    return packed(b"EVALSHA", script.sha, b"%d" % len(keys), *keys, *args)


class Scripts(NamedTuple):
    """Every script of the store, ready for EVALSHA (see `evalsha`)."""

    acquire: Script
    acquire_all: Script
    wake_acquire: Script
    last_acquire: Script
    renew: Script
    release: Script
    undo_acquire: Script
    undo_all: Script
    break_lease: Script
    raise_counter: Script
    retoken: Script
    write_record: Script
    swap_record: Script
    undo_record: Script
    read: Script
    list: Script
    prune: Script


SCRIPTS = Scripts(*map(_script, (
    ACQUIRE, ACQUIRE_ALL, WAKE_ACQUIRE, LAST_ACQUIRE, RENEW, RELEASE, UNDO_ACQUIRE, UNDO_ALL,
    BREAK, RAISE, RETOKEN, WRITE_RECORD, SWAP_RECORD, UNDO_RECORD, READ, LIST, PRUNE)))


class Keys(NamedTuple):
    """The keys of one name (see the module docstring)."""

    base: str
    slot0: str
    counter: str
    limit: str
    signal: str


def name_keys(prefix: str, name: str) -> Keys:
    """The keys of `name` under the store prefix `prefix`.

    Example:
        >>> name_keys("tenure:", "jobs").slot0
        'tenure:{jobs-65177a560cada1f767891398e66c46de}:s0'
    """
    base = f"{prefix}{{{safe_key(name)}}}:"
    return Keys(base, base + "s0", base + "token", base + "limit", base + "signal")


def glob_escape(text: str) -> str:
    """`text` with the glob characters of SCAN's MATCH escaped.

    Example:
        >>> glob_escape("a*b")
        'a\\\\*b'
    """
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)

