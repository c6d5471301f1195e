-- model:summary() text: one row per layer with its output shape and parameter count; a
-- functional model (nn.Model) adds its inputs and a "Connected to" column.
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
  return util.shape_text(shape)
end

-- Splits text at spaces into pieces of at most n - 1 characters (longer words stay whole).
local function wrap(text, n)
  local out, cur = {}, nil
  for word in text:gmatch("%S+") do
    if cur and #cur + 1 + #word <= n - 1 then cur = cur .. " " .. word
    else
      if cur then out[#out + 1] = cur end
      cur = word
    end
  end
  out[#out + 1] = cur or ""
  return out
end

local widths = {28, 26, 12, 32}

-- One table row; a cell too wide for its column continues on the next line.
local function row(cols)
  local cells, n = {}, 1
  for i, text in ipairs(cols) do
    cells[i] = i < #cols and wrap(text, widths[i]) or {text}
    n = math.max(n, #cells[i])
  end
  local lines = {}
  for k = 1, n do
    local parts = {}
    for i = 1, #cols do
      parts[i] = string.format(i < #cols and "%-" .. widths[i] .. "s" or "%s", cells[i][k] or "")
    end
    lines[k] = (" " .. table.concat(parts)):gsub("%s+$", "")
  end
  return table.concat(lines, "\n")
end

local function params(layer)
  return layer.built and group(layer:count_params()) or "0 (unbuilt)"
end

-- Rows of a Sequential (or a single layer).
local function layer_rows(model)
  local layers = #model.modules > 0 and model.modules or {model}
  local rows = {}
  for _, layer in ipairs(layers) do
    rows[#rows + 1] = {string.format("%s (%s)", layer.name, layer.__name), shape_text(layer.output_shape),
                       params(layer)}
  end
  return rows
end

-- Rows of a functional model: its inputs, then one per call in order.
local function graph_rows(model)
  local Node = require "tpu.nn.Node"
  local rows, counted = {}, {}
  for _, n in ipairs(model.inputs) do
    rows[#rows + 1] = {n.name .. " (Input)", shape_text(n.shape), "0", "-"}
  end
  for _, c in ipairs(model.calls) do
    local outs = Node.is(c.outputs) and {c.outputs} or c.outputs
    local shapes = {}
    for i, n in ipairs(outs) do shapes[i] = n.shape end
    rows[#rows + 1] = {string.format("%s (%s)", outs[1].name:gsub("%[1%]$", ""), c.layer.__name),
                       shape_text(#shapes == 1 and shapes[1] or shapes),
                       counted[c.layer] and "0" or params(c.layer),
                       table.concat(model.call_inputs(c), ", ")}
    counted[c.layer] = true
  end
  return rows
end

return function(model)
  local graph = model.calls ~= nil
  local width = graph and 98 or 65
  local lines = {string.format('Model: "%s"', model.name), string.rep("_", width),
                 row {"Layer (type)", "Output Shape", "Param #", graph and "Connected to" or nil},
                 string.rep("=", width)}
  for _, r in ipairs(graph and graph_rows(model) or layer_rows(model)) do lines[#lines + 1] = row(r) end
  local total, trainable = 0, 0
  for _, w in ipairs(model:weight_entries()) do
    local n = util.numel(w.entry.value.shape)
    total = total + n
    if w.trainable then trainable = trainable + n end
  end
  lines[#lines + 1] = string.rep("=", width)
  lines[#lines + 1] = "Total params: " .. group(total)
  lines[#lines + 1] = "Trainable params: " .. group(trainable)
  lines[#lines + 1] = "Non-trainable params: " .. group(total - trainable)
  lines[#lines + 1] = string.rep("_", width)
  local built = model.built
  for _, layer in ipairs(model.modules) do built = built or layer.built end
  if not built then
    lines[#lines + 1] = "The model is not built yet: call it on a batch or model:build(input_shape)."
  end
  return table.concat(lines, "\n")
end
