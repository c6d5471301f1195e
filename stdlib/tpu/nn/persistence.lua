-- Model weights in files (safetensors), mixed into nn.Module:
--
--   model:save("fashion.safetensors")
--   local fresh = build_model()          -- same architecture, built (called once or fitted)
--   fresh:load("fashion.safetensors")    -- checks every name, dtype and shape first
--
-- Weight names follow the model's structure, not the layers' generated names (which change
-- with how many layers a script made before): the 1-based position of each layer inside its
-- container, as print(model) numbers them, then the weight's own name. In
-- Sequential{Flatten(), Dense(512), Dense(10)} the names are "2.kernel", "2.bias", "3.kernel",
-- "3.bias"; a model's own weights have no prefix; nested containers add one position per
-- level ("4.1.gamma"). Every weight is saved, trainable or not (BatchNorm's moving statistics).
-- The files are plain safetensors: other tools read them and tputrain loads files they write
-- with the same names.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local M = {}

local FORMAT = "weights/1"

local core = require "tpu.core"

-- {name=, tensor=, layer=} for every weight, in parameters() order (a layer held by two
-- owners, shared weights, is named once, at its first place).
function Module:named_parameters()
  local out = {}
  self:_each_module(function(m, path)
    local prefix = path == "" and "" or path .. "."
    for _, e in ipairs(rawget(m, "_weights") or {}) do
      out[#out + 1] = {name = prefix .. e.name, tensor = e.value, layer = m}
    end
  end)
  return out
end

local function layer_text(layer)
  return string.format("layer %s, %s", layer.name, layer.__name)
end

local function fail_unbuilt(model, what)
  util.fail("%s: %s '%s' has no weights yet (layers create them on their first call): call "
    .. "it once on a batch, model(x), or fit it first", what, model.__name, model.name)
end

-- The name -> tensor table model:save writes, with the file's metadata.
function M.state_of(model, what)
  local named = model:named_parameters()
  if #named == 0 and not model.built then fail_unbuilt(model, what) end
  local tensors = {}
  for _, w in ipairs(named) do tensors[w.name] = w.tensor end
  return tensors, {["tputrain.format"] = FORMAT, ["tputrain.model"] = model.__name .. " " .. model.name}
end

-- Every difference between the model's weights and `tensors` (name -> tensor), one line each.
local function mismatches(named, tensors)
  local problems, known = {}, {}
  for _, w in ipairs(named) do
    known[w.name] = true
    local t, want = tensors[w.name], util.describe(w.tensor)
    if t == nil then
      problems[#problems + 1] = string.format("missing weight '%s' (%s, %s)", w.name, layer_text(w.layer), want)
    elseif not util.is_tensor(t) then
      problems[#problems + 1] = string.format("'%s' is %s, not a tensor", w.name, util.show(t))
    elseif util.describe(t) ~= want then
      problems[#problems + 1] = string.format("weight '%s' (%s) is %s in the model but %s in the file",
        w.name, layer_text(w.layer), want, util.describe(t))
    end
  end
  local extra = {}
  for name in pairs(tensors) do
    if not known[name] then extra[#extra + 1] = name end
  end
  table.sort(extra)
  for _, name in ipairs(extra) do
    problems[#problems + 1] = string.format("unexpected weight '%s' (%s) that the model does not have",
      name, util.is_tensor(tensors[name]) and util.describe(tensors[name]) or type(tensors[name]))
  end
  return problems
end

local MAX_SHOWN = 10

-- Sets the model's weights from name -> tensor after checking every one; `source` names where
-- they came from in the error ("ckpt.safetensors").
function M.assign(model, tensors, source, what)
  if type(tensors) ~= "table" or getmetatable(tensors) ~= nil then
    util.fail("%s: %s has no model weights (a table of name -> tensor, as model:save and "
      .. "checkpoints write), got %s", what, source, util.show(tensors))
  end
  local named = model:named_parameters()
  if #named == 0 and not model.built then fail_unbuilt(model, what) end
  local problems = mismatches(named, tensors)
  if #problems > 0 then
    local lines = {string.format("%s: %s does not match %s '%s' (%d problem%s):", what, source,
      model.__name, model.name, #problems, #problems == 1 and "" or "s")}
    for i = 1, math.min(#problems, MAX_SHOWN) do lines[#lines + 1] = "  " .. problems[i] end
    if #problems > MAX_SHOWN then
      lines[#lines + 1] = string.format("  ... and %d more", #problems - MAX_SHOWN)
    end
    lines[#lines + 1] = "  (the model must have the layers of the saved one, in the same order, with the same sizes and dtypes)"
    util.fail("%s", table.concat(lines, "\n"))
  end
  local list = {}
  for i, w in ipairs(named) do list[i] = tensors[w.name] end
  model:set_parameters(list)
end

local function check_path(path, what)
  if type(path) ~= "string" or path == "" then
    util.fail("%s: expected a file path, got %s", what, util.show(path))
  end
end

function Module:save(path)
  check_path(path, "model:save")
  local tensors, meta = M.state_of(self, "model:save")
  core.save_safetensors(path, tensors, meta)
end

-- A training checkpoint (callbacks.checkpoint's default) holds the model's weights beside the
-- optimizer's state: they are loaded from it, as Keras's load_weights reads a whole-model file.
-- A file of another format (a NumPy .npy, say) is said to be one before the core reads its first
-- bytes as a header length ("declared header length 379676406402707 is over the limit"). Other
-- files (too short, a directory, a corrupt header) are left to the core, which says what is wrong.
function M.check_safetensors(path, what)
  local f = io.open(path, "rb")
  if not f then return end
  local head = f:read(9)
  local size = head and f:seek("end")
  f:close()
  if not head or #head < 9 or head:sub(9, 9) == "{" then return end
  local kind = head:sub(1, 6) == "\x93NUMPY" and " (a NumPy .npy file)"
    or head:sub(1, 2) == "PK" and " (a zip archive: a .npz or .keras file?)"
    or head:sub(1, 8) == "\x89HDF\r\n\x1a\n" and " (an HDF5 file: a Keras .h5?)"
  if not kind then
    local length = string.unpack("<i8", head)
    if length >= 0 and length <= size - 8 then return end
    kind = string.format(" (its first 8 bytes, read as the header length, say %s bytes, and the file has %d)",
      length >= 0 and string.format("%d", length) or "more than 2^63", size)
  end
  util.fail("%s: %s is not a safetensors file%s; %s reads the files model:save, tpu.save and "
    .. "checkpoints write", what, path, kind, what)
end

function Module:load(path)
  check_path(path, "model:load")
  M.check_safetensors(path, "model:load")
  local tensors, meta = core.load_safetensors(path)
  local format = meta and meta["tputrain.format"]
  if format and format:match("^checkpoint/") then
    local state = require("tpu.checkpoint").load(path)
    if type(state.model) ~= "table" then util.fail("model:load: %s is a training checkpoint without model weights", path) end
    M.assign(self, state.model, path, "model:load")
    return self
  end
  M.assign(self, tensors, path, "model:load")
  return self
end

return M
