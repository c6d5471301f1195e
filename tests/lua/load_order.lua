-- Loads each stdlib module first, before tpu, and prints every module file that ran more than
-- once: a require cycle (a module requiring tpu while tpu is still requiring it) runs a file
-- twice. Prints "ok" when none did.
local modules = {
  "tpu.tensor", "tpu.shapes", "tpu.random", "tpu.jit", "tpu.errors", "tpu.class", "tpu.device",
  "tpu.advisor", "tpu.losses", "tpu.metrics", "tpu.checkpoint", "tpu.callbacks", "tpu.plot",
  "tpu.interrupt", "tpu.strategy", "tpu.mixed_precision", "tpu.nn", "tpu.nn.util",
  "tpu.nn.training", "tpu.nn.initializers", "tpu.nn.nonfinite", "tpu.nn.persistence",
  "tpu.nn.Module", "tpu.nn.Node", "tpu.nn.Dropout", "tpu.optim", "tpu.optim.Optimizer",
  "tpu.optim.schedule", "tpu.callbacks.util", "tpu.data", "tpu.data.sources", "tpu.data.structure",
}
local keep = {["tpu.core"] = true, ["tpu.options"] = true}

local runs
for i, search in ipairs(package.searchers) do
  package.searchers[i] = function(name)
    local loader, extra = search(name)
    if type(loader) ~= "function" then return loader, extra end
    return function(...)
      runs[name] = (runs[name] or 0) + 1
      return loader(...)
    end, extra
  end
end

local bad = 0
for _, first in ipairs(modules) do
  for name in pairs(package.loaded) do
    if (name == "tpu" or name:match("^tpu%.")) and not keep[name] then package.loaded[name] = nil end
  end
  runs = {}
  require(first)
  require "tpu"
  for name, n in pairs(runs) do
    if n > 1 then
      bad = bad + 1
      print(string.format("loading %s first ran %s %d times", first, name, n))
    end
  end
end
if bad == 0 then print("ok") end
