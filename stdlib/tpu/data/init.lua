-- tpu.data: input pipelines. Sources make a Dataset; its methods (shuffle, batch, map, ...)
-- make new ones; `ds:iter()` runs a pass.
--
--   local data = require("tpu").data
--   local train = data.fashion_mnist("train"):shuffle(60000, {seed = 1}):batch(256)
--   local ds = data.from_tensors{x, y}        -- x[N,...], y[N,...]: elements x[i], y[i]
--
-- Sources held in memory (from_tensors, idx, fashion_mnist, range) are shuffled and batched
-- as index lists, so each batch costs one gather per tensor.
local Dataset = require "tpu.data.Dataset"
local sources = require "tpu.data.sources"
local args = require "tpu.data.args"

-- "tpu" loads this module, so reach it lazily.
local tpu = setmetatable({}, {__index = function(_, k) return require("tpu")[k] end})

local M = {}

M.Dataset = Dataset
M.INFINITE = Dataset.INFINITE
M.UNKNOWN = Dataset.UNKNOWN

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
function M.from_tensors(tensors)
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

-- The integers 0 .. n-1 as i32 scalar tensors.
function M.range(n)
  n = args.integer(n, "range", "n", 0)
  return Dataset.SourceDataset(sources.RangeSource(n), "range(" .. n .. ")")
end

-- Reads an IDX file of examples and optionally one of labels (plain or .gz), as from_tensors.
function M.idx(images, labels)
  if type(images) ~= "string" then
    args.fail("idx: expected a file name, got %s", args.show(images))
  end
  if labels ~= nil and type(labels) ~= "string" then
    args.fail("idx: expected a file name for the labels, got %s", args.show(labels))
  end
  local x = tpu.core.read_idx(images)
  local components, desc = {x}, string.format("idx(%q)", images)
  if labels then
    local y = tpu.core.read_idx(labels)
    if y.shape[1] ~= x.shape[1] then
      args.fail("idx: %s holds %d examples but %s holds %d labels", images, x.shape[1], labels,
        y.shape[1])
    end
    components[2], desc = y, string.format("idx(%q, %q)", images, labels)
  end
  return Dataset.SourceDataset(sources.TensorSource(components), desc)
end

---------------------------------------------------------------- Fashion-MNIST

local FASHION_MNIST = {
  train = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
  test = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
}
local FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

-- The directories to search, and where they come from (for the message when absent).
local function fashion_mnist_dirs(opts)
  if opts.dir then return {opts.dir}, "the dir option" end
  local env = os.getenv("TPUTRAIN_DATA_DIR")
  if env and env ~= "" then return {env, env .. "/fashion-mnist"}, "TPUTRAIN_DATA_DIR" end
  return {FASHION_MNIST_DIR}, "the default location"
end

local function check_shape(path, t, expected, what)
  local shape = t.shape
  local ok = t.dtype == "u8" and #shape == #expected
  for i, d in ipairs(expected) do ok = ok and (d < 0 or shape[i] == d) end
  if not ok then
    args.fail("fashion_mnist: %s holds %s, expected %s", path, args.show(t), what)
  end
end

-- Fashion-MNIST from the IDX files of the Debian package dataset-fashion-mnist, or from
-- TPUTRAIN_DATA_DIR (or its fashion-mnist subdirectory), or from opts.dir when given.
-- split: "train" (60000 examples) or "test" (10000). Elements: x u8[28,28], y u8[] (0..9).
function M.fashion_mnist(split, opts)
  local names = type(split) == "string" and FASHION_MNIST[split]
  if not names then
    args.fail('fashion_mnist: unknown split %s (expected "train" or "test")', args.show(split))
  end
  opts = args.options(opts, "fashion_mnist", {"dir"})
  if opts.dir ~= nil and type(opts.dir) ~= "string" then
    args.fail("fashion_mnist: dir must be a directory name, got %s", args.show(opts.dir))
  end
  local dirs, origin = fashion_mnist_dirs(opts)
  local paths, missing = sources.find_files(dirs, names)
  if not paths then
    args.fail('fashion_mnist("%s"): cannot find %s (%s). Install the Debian package '
      .. "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or set "
      .. "TPUTRAIN_DATA_DIR to the directory holding these files", split, missing, origin)
  end
  local x, y = tpu.core.read_idx(paths[1]), tpu.core.read_idx(paths[2])
  check_shape(paths[1], x, {-1, 28, 28}, "u8[N,28,28] images")
  check_shape(paths[2], y, {x.shape[1]}, "u8[" .. x.shape[1] .. "] labels")
  local desc = string.format("fashion_mnist(%q)", split)
  return Dataset.SourceDataset(sources.TensorSource {x, y}, desc)
end

---------------------------------------------------------------- generator

-- fn() is called at the start of each pass and returns an iterator yielding one element per
-- call (one value per component: tensors, nested tables of tensors or numbers) and nil at
-- the end. Numbers become i32 (integers) or f32 scalar tensors.
function M.generator(fn)
  return Dataset.GeneratorDataset(args.func(fn, "generator"))
end

return M
