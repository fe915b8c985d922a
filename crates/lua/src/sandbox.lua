-- Cairn's Lua sandbox, run once when an interpreter is made (vm.rs), with
-- the standard libraries Redis 7.0 opens (base, table, string, math,
-- debug) and cjson, cmsgpack, struct and bit already loaded.
--
-- Redis 7.0 patches its Lua to mark tables read-only. PUC Lua 5.1 has no
-- such flag, so each protected table is reached through an empty proxy
-- whose metatable reads from the real table and refuses every write; the
-- functions that would see through a proxy (rawset, setmetatable) or miss
-- its contents (next, pairs, ipairs) are wrapped. Error texts are Redis's.
local real_g = ...
local dbg = debug
local raw_error, raw_pcall, raw_type, raw_rawget = error, pcall, type, rawget
local raw_rawset, raw_setmetatable, raw_next = rawset, setmetatable, next
local raw_pairs, raw_ipairs, raw_tostring = pairs, ipairs, tostring
local raw_loadstring, raw_load, raw_setfenv = loadstring, load, setfenv
local raw_xpcall = xpcall

local READONLY = 'Attempt to modify a readonly table'
local real_of = {}

local function refuse_write()
  raw_error(READONLY, 2)
end

local function protect(real)
  local proxy = raw_setmetatable({}, {
    __index = real,
    __newindex = refuse_write,
    __metatable = false,
  })
  real_of[proxy] = real
  return proxy
end

-- Redis's message handler (`__redis__err__handler`): the error becomes a
-- table {err=, source=, line=} naming the script's line. Frames of C
-- functions and of this file are skipped to find it.
local function err_handler(err)
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.what == 'tail' or i.source == '=[cairn]') do
    level = level + 1
    i = dbg.getinfo(level, 'nSl')
  end
  if raw_type(err) == 'userdata' then
    -- An error returned by one of the host's Rust functions.
    local text = raw_tostring(err)
    text = text:gsub('^runtime error: ', ''):gsub('\n.*', '')
    err = {err = 'ERR ' .. text}
  elseif raw_type(err) ~= 'table' then
    err = {err = 'ERR ' .. raw_tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end

-- Runs a script's function: true and its result, or false and the error
-- table.
local raw_select, raw_unpack = select, unpack
local function run(f, ...)
  local n = raw_select('#', ...)
  if n == 0 then
    return raw_xpcall(f, err_handler)
  end
  local args = {...}
  return raw_xpcall(function() return f(raw_unpack(args, 1, n)) end, err_handler)
end

-- Lua's pcall, except that an error table carrying `err` comes back as
-- that string (Redis 7.0 `luaRedisPcall`), as scripts written for Redis 6
-- expect of a failed redis.call.
-- The host's control flags: `killed` is set from Rust when a script is
-- being stopped, and no pcall, xpcall or coroutine may then catch the
-- error (Redis switches its hook to every line for the same end).
local ctl = {killed = false}

local function pcall_result(ok, ...)
  if ok then
    return ok, ...
  end
  local e = ...
  if ctl.killed then
    raw_error(e, 0)
  end
  if raw_type(e) == 'table' then
    local m = e.err
    if raw_type(m) == 'string' then
      return false, m
    end
  end
  return false, e
end

local function redis_pcall(...)
  return pcall_result(raw_pcall(...))
end

local function unless_killed(ok, ...)
  if not ok and ctl.killed then
    raw_error((...), 0)
  end
  return ok, ...
end

local function redis_xpcall(f, h)
  return unless_killed(raw_xpcall(f, h))
end

local raw_resume = coroutine.resume
coroutine.resume = function(...)
  return unless_killed(raw_resume(...))
end

local proxy_g
local wrappers = {
  pcall = redis_pcall,
  xpcall = redis_xpcall,
  rawset = function(t, k, v)
    if real_of[t] then
      raw_error(READONLY, 0)
    end
    return raw_rawset(t, k, v)
  end,
  setmetatable = function(t, m)
    if real_of[t] then
      raw_error(READONLY, 0)
    end
    return raw_setmetatable(t, m)
  end,
  next = function(t, k)
    return raw_next(real_of[t] or t, k)
  end,
  pairs = function(t)
    local f, s, c = raw_pairs(t)
    return f, real_of[s] or s, c
  end,
  ipairs = function(t)
    local f, s, c = raw_ipairs(t)
    return f, real_of[s] or s, c
  end,
  rawget = function(t, k)
    return raw_rawget(real_of[t] or t, k)
  end,
  -- Chunks loaded by a script see the script's (read-only) globals.
  -- Precompiled chunks are refused, as Redis 7.0's Lua does (its parser
  -- takes text only: bytecode is not verified and can break the VM);
  -- the leading space makes Lua parse one as text and fail with Redis's
  -- error, under the chunk's own name.
  loadstring = function(s, name)
    if raw_type(s) == 'string' and s:byte(1) == 27 then
      return raw_loadstring(' ' .. s, name or s)
    end
    local f, e = raw_loadstring(s, name)
    if f then
      raw_setfenv(f, proxy_g)
    end
    return f, e
  end,
  -- Redis 7.0's load takes only a function. (Level 3: this function is
  -- called through a C frame, see `vm.rs`'s `pass_through`.)
  load = function(fn, name)
    if raw_type(fn) ~= 'function' then
      raw_error("bad argument #1 to 'load' (function expected, got " .. raw_type(fn) .. ")", 3)
    end
    -- The pieces are read first, to refuse a precompiled chunk as
    -- loadstring does; Lua stops reading at nil or an empty string.
    local pieces, n = {}, 0
    repeat
      local p = fn()
      n = n + 1
      pieces[n] = p
    until raw_type(p) ~= 'string' or p == ''
    if raw_type(pieces[1]) == 'string' and pieces[1]:byte(1) == 27 then
      pieces[1] = ' ' .. pieces[1]
    end
    local i = 0
    local f, e = raw_load(function()
      i = i + 1
      return pieces[i]
    end, name)
    if f then
      -- Chunks loaded by a script see the script's (read-only) globals.
      raw_setfenv(f, proxy_g)
    end
    return f, e
  end,
}
local wrapper_names = {}
for k, v in raw_pairs(wrappers) do
  real_g[k] = v
  wrapper_names[#wrapper_names + 1] = k
end

-- What Redis 7.0 leaves out of the globals.
for _, name in raw_ipairs({'print', 'getfenv', 'setfenv', 'newproxy', 'module',
    'require', 'dofile', 'loadfile', 'debug', 'os', 'io', 'package'}) do
  real_g[name] = nil
end

for _, name in raw_ipairs({'redis', 'string', 'math', 'table', 'coroutine',
    'bit', 'struct', 'cjson', 'cmsgpack'}) do
  if real_g[name] ~= nil then
    real_g[name] = protect(real_g[name])
  end
end
-- ("x"):upper() reads string's functions through the proxy too, and
-- getmetatable('') answers a read-only view of the strings' metatable.
local string_mt = getmetatable('')
string_mt.__index = real_g.string
string_mt.__metatable = protect(string_mt)

-- FUNCTION libraries run with an environment of their own, as Redis 7.0
-- switches its globals while a library loads: then only the library API
-- (redis.register_function, redis.log, the constants) is there; when the
-- functions run, the same globals as scripts.
local load_api_redis = {}
local function no_global(_, k)
  raw_error("Script attempted to access nonexistent global variable '" .. raw_tostring(k) .. "'", 2)
end
for _, name in raw_ipairs({'register_function', 'log', 'LOG_DEBUG', 'LOG_VERBOSE',
    'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  load_api_redis[name] = real_g.redis[name]
end
raw_setmetatable(load_api_redis, {__index = no_global})
-- Scripts and running functions have no register_function.
real_of[real_g.redis].register_function = nil
local load_api = raw_setmetatable({redis = protect(load_api_redis)}, {__index = no_global})
local function_env_mt = {__newindex = refuse_write, __metatable = false}
local function_env = raw_setmetatable({}, function_env_mt)
real_of[function_env] = real_g
local load_api_proxy = protect(load_api)
local function set_loading(on)
  function_env_mt.__index = on and load_api_proxy or real_g
end
set_loading(false)

proxy_g = protect(real_g)
-- getmetatable(_G) answers a read-only empty table (Redis: the globals'
-- own read-only metatable), so changing it fails with Redis's error; it
-- holds nothing that leads to the real globals.
dbg.getmetatable(proxy_g).__metatable =
  raw_setmetatable({}, {__newindex = refuse_write, __metatable = false})
real_g._G = proxy_g
raw_setmetatable(real_g, {
  __index = function(_, k)
    raw_error("Script attempted to access nonexistent global variable '" .. raw_tostring(k) .. "'", 2)
  end,
  __metatable = false,
})
return proxy_g, run, ctl, wrapper_names, function_env, set_loading, err_handler
