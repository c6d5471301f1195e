-- model:summary() text: one row per layer with its output shape, parameter count, forward
-- FLOPs and HBM; a functional model (nn.Model) adds its inputs and a "Connected to" column.
-- FLOPs and HBM come from the engine's cost model on one traced forward pass (shapes only, at
-- the batch the model was built with, else 1): FLOPs per op (a multiply-add counts 2), summed
-- over the nodes traced in each layer's tpu.scope; HBM is the layer's weights and its output,
-- padded to the TPU's 8x128 tiles. A model that cannot be traced from shapes shows "?".
local util = require "tpu.nn.util"
local jit = require "tpu.jit"
local core = require "tpu.core"

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

-- 803840 -> "803.8K"
local function compact(n)
  for _, u in ipairs {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}} do
    if n >= u[1] then return string.format("%.4g%s", n / u[1], u[2]) end
  end
  return string.format("%d", math.floor(n))
end

-- ---------------------------------------------------------------- costs
-- The model's inputs as tpu.shape_dtype (a None batch becomes `batch`), or nil when a shape
-- is unknown; and the batch.
local function input_specs(model)
  if model.calls then
    local specs, batch = {}, 1
    for i, n in ipairs(model.inputs) do
      local shape = util.copy(n.shape)
      if shape[1] == -1 then shape[1] = batch end
      for _, d in ipairs(shape) do if d < 0 then return nil end end
      specs[i] = jit.shape_dtype(shape, n.dtype)
    end
    return model.single_input and specs[1] or specs, batch
  end
  local shape = model.input_shape
  if type(shape) ~= "table" or type(shape[1]) ~= "number" then return nil end
  shape = util.copy(shape)
  if shape[1] < 0 then shape[1] = 1 end
  for _, d in ipairs(shape) do if d < 0 then return nil end end
  return jit.shape_dtype(shape, model.input_dtype or "f32"), shape[1]
end

-- Every layer name under `layer` (itself and its sublayers, whose scopes nest inside) -> row.
local function claim(names, layer, row)
  if names[layer.name] == nil then names[layer.name] = row end
  for _, m in ipairs(layer.modules or {}) do claim(names, m, row) end
end

-- costs[layer] = {flops=, out_bytes=} from one traced forward pass, and the batch; or nil and
-- why not.
local function layer_costs(model, layers)
  local x, batch = input_specs(model)
  if not x then return nil, "an input has a dimension of unknown size (None) besides the batch" end
  local ok, nodes = pcall(jit.cost_nodes, function(v) return model(v, {training = false}) end,
    model.name .. ".summary", x)
  if not ok then return nil, "the forward pass could not be traced from the input shapes" end
  local names, costs = {}, {}
  for _, layer in ipairs(layers) do
    claim(names, layer, layer)
    costs[layer] = {flops = 0, out_bytes = 0}
  end
  for _, n in ipairs(nodes) do
    local owner = names[n.loc:match("%(([^()]*)%)$") or ""]
    if owner then
      local c = costs[owner]
      c.flops = c.flops + n.flops
      c.out_bytes = core.padded_bytes(n.dtype, n.shape)  -- the layer's last op makes its output
    end
  end
  return costs, batch
end

local function weight_bytes(layer)
  local total = 0
  for _, w in ipairs(layer.built and layer:parameters() or {}) do total = total + core.padded_bytes(w.dtype, w.shape) end
  return total
end

-- The FLOPs and HBM cells of a layer's first row ("0" on the rows of its later calls).
local function cost_cells(costs, layer, repeated)
  if not costs then return "?", "?" end
  if repeated then return "0", "0" end
  local c = costs[layer]
  return compact(c.flops), core.format_bytes(weight_bytes(layer) + c.out_bytes)
end

-- ---------------------------------------------------------------- table
local widths = {28, 26, 12, 10, 12, 32}

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
  return layer.built and group((layer:count_params())) or "0 (unbuilt)"
end

-- Rows of a Sequential (or a single layer).
local function layer_rows(model)
  local layers = #model.modules > 0 and model.modules or {model}
  local costs, batch = layer_costs(model, layers)
  local rows = {}
  for _, layer in ipairs(layers) do
    local flops, hbm = cost_cells(costs, layer)
    rows[#rows + 1] = {string.format("%s (%s)", layer.name, layer.__name), shape_text(layer.output_shape),
                       params(layer), flops, hbm}
  end
  return rows, costs, batch
end

-- Rows of a functional model: its inputs, then one per call in order.
local function graph_rows(model)
  local Node = require "tpu.nn.Node"
  local costs, batch = layer_costs(model, model.modules)
  local rows, counted = {}, {}
  for _, n in ipairs(model.inputs) do
    rows[#rows + 1] = {n.name .. " (Input)", shape_text(n.shape), "0", "0", "0", "-"}
  end
  for _, c in ipairs(model.calls) do
    local outs = Node._is(c.outputs) and {c.outputs} or c.outputs
    local shapes = {}
    for i, n in ipairs(outs) do shapes[i] = n.shape end
    local flops, hbm = cost_cells(costs, c.layer, counted[c.layer])
    rows[#rows + 1] = {string.format("%s (%s)", outs[1].name:gsub("%[1%]$", ""), c.layer.__name),
                       shape_text(#shapes == 1 and shapes[1] or shapes),
                       counted[c.layer] and "0" or params(c.layer), flops, hbm,
                       table.concat(model._call_inputs(c), ", ")}
    counted[c.layer] = true
  end
  return rows, costs, batch
end

-- Totals of the cost columns (batch: the batch, or why there are no costs).
local function cost_lines(costs, batch)
  if not costs then return {"FLOPs and HBM: ? (" .. batch .. ")"} end
  local flops = 0
  for _, c in pairs(costs) do flops = flops + c.flops end
  return {string.format("Forward FLOPs at batch %d: %s (a multiply-add counts 2)", batch, compact(flops)),
          string.format("HBM per layer: its weights and its output at batch %d, padded to TPU tiles of 8x128", batch)}
end

return function(model)
  local graph = model.calls ~= nil
  local width = graph and 120 or 87
  local lines = {string.format('Model: "%s"', model.name), string.rep("_", width),
                 row {"Layer (type)", "Output Shape", "Param #", "FLOPs", "HBM", graph and "Connected to" or nil},
                 string.rep("=", width)}
  local rows, costs, batch = (graph and graph_rows or layer_rows)(model)
  for _, r in ipairs(rows) do lines[#lines + 1] = row(r) end
  local total, trainable, non_trainable = model:count_params()
  lines[#lines + 1] = string.rep("=", width)
  lines[#lines + 1] = "Total params: " .. group(total)
  lines[#lines + 1] = "Trainable params: " .. group(trainable)
  lines[#lines + 1] = "Non-trainable params: " .. group(non_trainable)
  local built = model.built
  for _, layer in ipairs(model.modules) do built = built or layer.built end
  if built then
    for _, l in ipairs(cost_lines(costs, batch)) do lines[#lines + 1] = l end
  end
  lines[#lines + 1] = string.rep("_", width)
  if not built then
    lines[#lines + 1] = "The model is not built yet: call it on a batch or model:build(input_shape)."
  end
  return table.concat(lines, "\n")
end
