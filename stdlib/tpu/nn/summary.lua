-- model:summary() text: one row per layer with its output shape and parameter count.
local util = require "tpu.nn.util"

local function group(n)  -- 407050 -> "407,050"
  local s = tostring(n)
  repeat
    local k
    s, k = s:gsub("^(%d+)(%d%d%d)", "%1,%2")
  until k == 0
  return s
end

local function shape_text(shape)
  if not shape then return "?" end
  if type(shape[1]) == "table" then  -- several outputs
    local parts = {}
    for i, s in ipairs(shape) do parts[i] = shape_text(s) end
    return table.concat(parts, ", ")
  end
  local dims = {"None"}
  for i = 2, #shape do dims[i] = tostring(shape[i]) end
  return "(" .. table.concat(dims, ", ") .. (#shape == 1 and ",)" or ")")
end

local function row(cols)
  local line = string.format(" %-28s%-26s%s", cols[1], cols[2], cols[3])
  return (line:gsub("%s+$", ""))
end

return function(model)
  local layers = #model.modules > 0 and model.modules or {model}
  local lines = {string.format('Model: "%s"', model.name), string.rep("_", 65),
                 row {"Layer (type)", "Output Shape", "Param #"}, string.rep("=", 65)}
  for _, layer in ipairs(layers) do
    local params = layer.built and group(layer:count_params()) or "0 (unbuilt)"
    lines[#lines + 1] = row {string.format("%s (%s)", layer.name, layer.__name),
                             shape_text(layer.output_shape), params}
  end
  local total, trainable = 0, 0
  for _, w in ipairs(model:weight_entries()) do
    local n = util.numel(w.entry.value.shape)
    total = total + n
    if w.trainable then trainable = trainable + n end
  end
  lines[#lines + 1] = string.rep("=", 65)
  lines[#lines + 1] = "Total params: " .. group(total)
  lines[#lines + 1] = "Trainable params: " .. group(trainable)
  lines[#lines + 1] = "Non-trainable params: " .. group(total - trainable)
  lines[#lines + 1] = string.rep("_", 65)
  local built = model.built
  for _, layer in ipairs(layers) do built = built or layer.built end
  if not built then
    lines[#lines + 1] = "The model is not built yet: call it on a batch or model:build(input_shape)."
  end
  return table.concat(lines, "\n")
end
