-- tpu.data: input pipelines. Sources make a Dataset; its methods (shuffle, batch, map, ...)
-- make new ones; `ds:iter()` runs a pass.
--
--   local data = require("tpu").data
--   local train = data.fashion_mnist("train"):shuffle(60000, {seed = 1}):batch(256)
--   local ds = data.from_tensors{x, y}        -- x[N,...], y[N,...]: elements x[i], y[i]
--
-- Sources held in memory (from_tensors, range, idx, npy, csv, fashion_mnist, text sources,
-- anything after cache()) are shuffled and batched as index lists, so each batch costs one
-- gather per tensor. Files: files.lua (idx, npy, csv), text.lua (text_lines, text_records,
-- fortunes), fashion_mnist.lua, images.lua (image_folder: decoded when batched);
-- transforms: one class per file in transforms/.
local Dataset = require "tpu.data.Dataset"
local sources = require "tpu.data.sources"
local args = require "tpu.data.args"
local files = require "tpu.data.files"
local text = require "tpu.data.text"
local errors = require "tpu.errors"

for _, name in ipairs {"Shuffle", "Take", "Skip", "Shard", "Cycle", "Filter", "Cache",
  "Prefetch", "Batch", "PaddedBatch", "Map", "HostMap"} do
  require("tpu.data.transforms." .. name)
end

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local M = {}

M.Dataset = Dataset
M.INFINITE = Dataset.INFINITE
M.UNKNOWN = Dataset.UNKNOWN
M.Vocabulary = require "tpu.data.Vocabulary"

local function is_sequence(t)
  local n = #t
  if n == 0 then return false end
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

-- Elements are slices along the first dimension: from_tensors{x, y} yields (x[i], y[i]).
-- Components may be nested tables ({{xa, xb}, y}); a single tensor or a table with named
-- fields is one component.
function M.from_tensors(tensors, extra)
  errors.none(2, "from_tensors", extra)
  local components
  if tpu.is_tensor(tensors) then
    components = {tensors}
  elseif type(tensors) == "table" then
    components = is_sequence(tensors) and table.move(tensors, 1, #tensors, 1, {}) or {tensors}
  else
    args.fail("from_tensors: expected a tensor or a table of tensors such as {x, y}, got %s",
      args.show(tensors))
  end
  sources.check_components(components, "from_tensors")
  local desc = "from_tensors{" .. string.rep("...", #components, ", ") .. "}"
  return Dataset.SourceDataset(sources.TensorSource(components), desc)
end

-- tf.data's name for the same thing: tf's from_tensors makes one element of the whole
-- tensors, its from_tensor_slices slices them along the first axis, as ours does.
M.from_tensor_slices = M.from_tensors

-- The integers 0 .. n-1 as i32 scalar tensors.
function M.range(n, extra)
  errors.none(2, "range", extra)
  n = args.integer(n, "range", "n", 0)
  return Dataset.SourceDataset(sources.RangeSource(n), "range(" .. n .. ")")
end

-- fn() is called at the start of each pass and returns an iterator yielding one element per
-- call (one value per component: tensors, strings, numbers, booleans or nested tables of
-- them) and nil at the end. Numbers become i32 (integers) or f32 scalar tensors.
function M.generator(fn, extra)
  errors.none(2, "generator", extra)
  return require("tpu.data.GeneratorDataset")(args.func(fn, "generator"))
end

M.idx, M.npy, M.csv = files.idx, files.npy, files.csv
M.text_lines, M.text_records, M.fortunes = text.text_lines, text.text_records, text.fortunes
M.fashion_mnist = require "tpu.data.fashion_mnist"
M.image_folder = require("tpu.data.images").image_folder

-- A name tpu.data lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.data")
