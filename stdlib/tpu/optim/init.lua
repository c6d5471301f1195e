-- tpu.optim: functional optimizers (state is a table of tensors; updates trace into the step)
-- and learning-rate schedules (optim.schedule).
local errors = require "tpu.errors"

local optim = {}

optim.Optimizer = require "tpu.optim.Optimizer"
optim.SGD = require "tpu.optim.SGD"
optim.Adam = require "tpu.optim.Adam"
optim.AdamW = require "tpu.optim.AdamW"
optim.RMSprop = require "tpu.optim.RMSprop"
optim.schedule = require "tpu.optim.schedule"

local by_name = {sgd = optim.SGD, adam = optim.Adam, adamw = optim.AdamW, rmsprop = optim.RMSprop}
local names = {}
for name in pairs(by_name) do names[#names + 1] = name end
table.sort(names)

-- An optimizer object, or a name ("adam", "sgd", "adamw", "rmsprop") for one with default settings.
function optim.get(x, extra)
  errors.none(2, "get", extra)
  local util = require "tpu.nn.util"
  if type(x) == "string" and by_name[x:lower()] then return by_name[x:lower()]() end
  if type(x) == "table" and rawget(x, "__index") == x then
    util.fail("optimizer %s is a class; make one: optim.%s{lr = ...}", x.__name, x.__name)
  end
  if type(x) == "table" and type(x.update) == "function" and type(x.init) == "function" then
    return x
  end
  util.fail("unknown optimizer %s%s (expected an optimizer such as optim.Adam{} or one of: %s)", util.show(x),
    errors.did_you_mean(x, names), table.concat(names, ", "))
end

-- A name tpu.optim lacks is an error listing what it has (optim.Nadam{} names what there is).
return errors.strict_namespace(optim, "tpu.optim")
