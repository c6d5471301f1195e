-- User-facing errors of the Lua libraries, in one place: every message starts with the
-- user's "file:line: " (stdlib frames are skipped), and argument errors read like Lua's own
-- (`bad argument #1 to 'sum' (number or {axis=, keepdims=} expected, got string)`).
-- Needs only tpu.core, so any module may require it without a cycle.
local core = require "tpu.core"

local M = {}

-- "file:line: " of the user's code calling now, or "" when the core cannot tell. Errors found
-- later (while iterating a data set) keep it to point at the call that set things up.
function M.where()
  return core.user_where and core.user_where() or ""
end

-- Raises where() .. formatted message, with no position added by Lua.
function M.fail(fmt, ...)
  error(M.where() .. string.format(fmt, ...), 0)
end

-- fail with a position taken earlier by where().
function M.fail_at(where, fmt, ...)
  error(where .. string.format(fmt, ...), 0)
end

local function is_tensor(v) return core.is_tensor(v) end

-- A value as a message echoes it: 3, nan, "val", a function, a tensor f32[2,3], {1, x=2}.
function M.show(v)
  local kind = type(v)
  if kind == "string" then return string.format("%q", v) end
  if kind == "number" and v ~= v then return "nan" end
  if kind == "number" or kind == "boolean" or kind == "nil" then return tostring(v) end
  if is_tensor(v) then return string.format("a tensor %s[%s]", v.dtype, table.concat(v.shape, ",")) end
  if kind ~= "table" then return "a " .. kind end
  local parts = {}
  for k, x in pairs(v) do
    if #parts == 6 then parts[#parts + 1] = "..."; break end
    local key = math.type(k) == "integer" and "" or tostring(k) .. "="
    parts[#parts + 1] = key .. (type(x) == "table" and not is_tensor(x) and "{...}" or M.show(x))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The type name Lua's argument errors use: a tensor is "tpu.Tensor", a class instance its name.
function M.typename(v)
  local mt = getmetatable(v)
  if type(mt) == "table" and type(rawget(mt, "__name")) == "string" then return mt.__name end
  return type(v)
end

-- True when Lua can print v as an error message (a string, a number, or __tostring).
local function printable(v)
  if type(v) == "string" or type(v) == "number" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__tostring ~= nil
end

local function rethrow(where, what, ok, ...)
  if ok then return ... end
  local err = ...
  if not printable(err) then
    M.fail_at(where, "%s raised an error object that has no __tostring: %s", what, M.show(err))
  end
  error(err, 0)
end

-- fn(...) for a library that calls a user's function later (a data set's map): an error the
-- function raises passes through unchanged when Lua can print it, else becomes a message that
-- says what it was, located at `where` (the call that set the function up).
function M.call(where, what, fn, ...)
  return rethrow(where, what, pcall(fn, ...))
end

------------------------------------------------------------------ argument checks

-- Raises "<where>bad argument #n to 'fname' (msg)".
function M.arg_error(n, fname, msg)
  error(string.format("%sbad argument #%d to '%s' (%s)", M.where(), n, fname, msg), 0)
end

-- "<expected> expected, got <type>" for argument n.
function M.type_error(n, fname, expected, v)
  M.arg_error(n, fname, expected .. " expected, got " .. (v == nil and "no value" or M.typename(v)))
end

local kinds = {
  number = function(v) return type(v) == "number" end,
  integer = function(v) return math.type(v) == "integer" or (math.type(v) == "float" and v == math.floor(v)) end,
  string = function(v) return type(v) == "string" end,
  boolean = function(v) return type(v) == "boolean" end,
  table = function(v) return type(v) == "table" and not is_tensor(v) end,
  tensor = is_tensor,
  ["function"] = function(v)
    local mt = getmetatable(v)
    return type(v) == "function" or (type(mt) == "table" and mt.__call ~= nil)
  end,
}

-- True when v is of the kind ("number", "integer", "string", "boolean", "table", "tensor",
-- "function"; a callable table counts as a function).
function M.is(v, kind) return kinds[kind](v) end

-- Argument n of fname must be of `kind` ("integer or nil" accepts nil); returns it.
function M.check(n, fname, v, kind)
  local base = kind:match("^(%a+) or nil$")
  if base then
    if v == nil then return nil end
    kind = base
  end
  if not kinds[kind](v) then M.type_error(n, fname, kind, v) end
  if kind == "integer" then return math.tointeger(v) end
  return v
end

-- Option table argument n of fname (nil gives {}): a table whose string keys are all in
-- `allowed`, e.g. errors.options(2, "sum", opts, {"axis", "keepdims"}). An unknown key is an
-- error naming it (a typo is never ignored).
function M.options(n, fname, opts, allowed)
  if opts == nil then return {} end
  if not kinds.table(opts) then
    M.type_error(n, fname, "table {" .. table.concat(allowed, "=, ") .. "=}", opts)
  end
  M.check_keys(fname, opts, allowed)
  return opts
end

-- Edits (insert, delete, replace, swap of neighbours) between a and b, ignoring case.
local function distance(a, b)
  a, b = a:lower(), b:lower()
  local d = {}
  for i = 0, #a do d[i] = {[0] = i} end
  for j = 1, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local same = a:byte(i) == b:byte(j)
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same and 0 or 1))
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

-- "; did you mean 'epochs'?" when one name of `known` is a likely typo of `given` (within one
-- edit for names of up to 4 letters, two beyond), else "".
function M.did_you_mean(given, known)
  if type(given) ~= "string" then return "" end
  local best, best_d, ties = nil, math.huge, 0
  for _, name in ipairs(known) do
    local d = distance(given, name)
    if d < best_d then best, best_d, ties = name, d, 1 elseif d == best_d then ties = ties + 1 end
  end
  local close = best_d <= (#given <= 4 and 1 or 2) and ties == 1
  return close and string.format("; did you mean '%s'?", best) or ""
end

-- Refuses keys of opts that are not in `allowed` (list keys are left to the caller).
function M.check_keys(fname, opts, allowed)
  for k in pairs(opts) do
    if math.type(k) ~= "integer" then
      local known = false
      for _, a in ipairs(allowed) do known = known or k == a end
      if not known then
        local names = {table.unpack(allowed)}
        table.sort(names)
        M.fail("%s: unknown option '%s'%s (known options: %s)", fname, tostring(k), M.did_you_mean(k, names),
          #names > 0 and table.concat(names, ", ") or "none")
      end
    end
  end
end

-- A copy of the option table opts with Keras's names (DESIGN section 3; aliases maps a Keras
-- name to ours) turned into ours, for our names in `known`; other keys are kept as they are, for
-- the caller's own check. Giving both names of one option is an error.
function M.keras_names(who, opts, aliases, known)
  local ok = {}
  for _, k in ipairs(known) do ok[k] = true end
  local out = {}
  for k, v in pairs(opts) do
    local ours = aliases[k]
    if ours and ok[ours] then
      if opts[ours] ~= nil then M.fail("%s: give %s or its Keras name %s, not both", who, ours, k) end
      out[ours] = v
    else
      out[k] = v
    end
  end
  return out
end

-- The error of a method called with a dot (obj.method(x) passes x as obj): `owner` names whose
-- method it is ("the model"), `usage` the right call ("model:fit(x, y)"), `got` what came
-- where the object goes, `noun` the object; `fix` is added to the parenthesis.
function M.dot_call(method, owner, usage, got, noun, fix)
  M.fail("%s is a method of %s: call it with a colon, %s (got %s where the %s goes%s)", method, owner, usage,
    got, noun, fix or "")
end

-- Makes each method of cls named in `names` refuse a call with a dot (key.split(2) passes 2 as
-- the key): "split is a method of the key: call it with a colon, key:split(...) (got 2 where
-- the key goes)". is_instance(v) tells the class's objects; noun names one in the message and
-- var (default noun) stands for one in the call shown.
function M.colon_methods(cls, noun, names, is_instance, var)
  var = var or noun
  for _, name in ipairs(names) do
    local method = cls[name]
    cls[name] = function(self, ...)
      if not is_instance(self) then
        M.dot_call(name, "the " .. noun, string.format("%s:%s(...)", var, name), M.show(self), noun)
      end
      return method(self, ...)
    end
  end
end

-- Makes reading a name the namespace t lacks an error, not a nil that fails later as "attempt
-- to call a nil value": "tpu.optim has no Nadam; did you mean 'Adam'? (it has Adam, AdamW, ...)".
-- opts (all optional): listed(k, v) picks the names the message knows (default: those not
-- starting with "_"); extra, more names it knows (those load would give); has(names) -> the
-- parenthesis ("its layers and models: ..."); load(key) -> a value to keep under key, or nil
-- (modules loaded on first use); private = true: a name starting with "_" reads nil (the host
-- probes such names). rawget probes without an error; integer keys (ipairs and other walks)
-- read nil. The metatable's __namespace holds the name.
function M.strict_namespace(t, name, opts)
  opts = opts or {}
  local listed = opts.listed or function(k) return not k:match("^_") end
  return setmetatable(t, {__namespace = name, __index = function(_, key)
    if type(key) ~= "string" then return nil end
    local v = opts.load and opts.load(key)
    if v ~= nil then
      rawset(t, key, v)
      return v
    end
    if opts.private and key:match("^_") then return nil end
    local names = {}
    for k, value in pairs(t) do
      if type(k) == "string" and listed(k, value) then names[#names + 1] = k end
    end
    for _, k in ipairs(opts.extra or {}) do
      if rawget(t, k) == nil then names[#names + 1] = k end
    end
    table.sort(names)
    local has = opts.has and opts.has(names) or "it has " .. table.concat(names, ", ")
    M.fail("%s has no %s%s (%s)", name, key, M.did_you_mean(key, names), has)
  end})
end

-- opts[name], or `default` only when it is absent (nil): a false is passed on for the option's
-- own check to refuse, not taken for the default (as `opts[name] or default` would).
function M.option(opts, name, default)
  local v = opts[name]
  if v == nil then return default end
  return v
end

-- Argument n must be absent: for functions that take no more than n - 1 arguments.
function M.none(n, fname, v)
  if v ~= nil then M.arg_error(n, fname, "no value expected, got " .. M.typename(v)) end
end

return M
