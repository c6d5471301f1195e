-- The configuration of a text model builder (BertBase, GPT2Small): its options over defaults,
-- each checked (sizes are positive integers, dropout a rate in [0, 1)), unknown names refused.
local errors = require "tpu.errors"
local util = require "tpu.nn.util"

local M = {}

-- An initializer of standard deviation `std`, drawn uniformly on [-std sqrt 3, std sqrt 3]
-- (which has that deviation) because a uniform draw is about 15x faster than a normal one here
-- (110M weights in a fraction of a second); Hugging Face draws from N(0, std).
function M.uniform_std(std)
  local limit = std * math.sqrt(3)
  return function(key, shape, dtype)
    local t = require("tpu.random").uniform(key, shape, {minval = -limit, maxval = limit})
    return dtype and t.dtype ~= dtype and t:cast(dtype) or t
  end
end

-- The initializer of BERT's and GPT-2's weights: standard deviation 0.02 (initializer_range).
M.std_002 = M.uniform_std(0.02)

-- opts over defaults; `extra` lists the options without a default (nil when absent) and their
-- kinds: {num_classes = "integer", logits = "boolean"}.
function M.read(who, opts, defaults, extra)
  opts = opts or {}
  if type(opts) ~= "table" then
    util.fail("%s: options must be a table, got %s", who, util.show(opts))
  end
  local known = {}
  for k in pairs(defaults) do known[#known + 1] = k end
  for k in pairs(extra) do known[#known + 1] = k end
  errors.check_keys(who, opts, known)
  local c = {}
  for k, v in pairs(defaults) do c[k] = opts[k] == nil and v or opts[k] end
  for k, v in pairs(c) do
    c[k] = k == "dropout" and util.check_range(who, k, v, 0, 1, true)
           or util.check_integer(who, k, v)
  end
  for k, kind in pairs(extra) do
    if opts[k] ~= nil then
      c[k] = kind == "boolean" and util.flag(who, opts, k) or util.check_integer(who, k, opts[k])
    end
  end
  if c.hidden_dim % c.num_heads ~= 0 then
    util.fail("%s: hidden_dim (%d) must be divisible by num_heads (%d)", who, c.hidden_dim,
      c.num_heads)
  end
  return c
end

return M
