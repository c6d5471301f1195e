-- data.fashion_mnist(split): the Fashion-MNIST IDX files of the Debian package
-- dataset-fashion-mnist (or TPUTRAIN_DATA_DIR, or {dir =}).
local Dataset = require "tpu.data.Dataset"
local sources = require "tpu.data.sources"
local args = require "tpu.data.args"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local FILES = {
  train = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
  test = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
}
local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"

-- The directories to search, and where they come from (for the message when absent).
local function search_dirs(opts)
  if opts.dir then return {opts.dir}, "the dir option" end
  local env = os.getenv("TPUTRAIN_DATA_DIR")
  if env and env ~= "" then return {env, env .. "/fashion-mnist"}, "TPUTRAIN_DATA_DIR" end
  return {DEFAULT_DIR}, "the default location"
end

local function check_shape(path, t, expected, what)
  local shape = t.shape
  local ok = t.dtype == "u8" and #shape == #expected
  for i, d in ipairs(expected) do ok = ok and (d < 0 or shape[i] == d) end
  if not ok then
    args.fail("fashion_mnist: %s holds %s, expected %s", path, args.show(t), what)
  end
end

-- split: "train" (60000 examples) or "test" (10000). Elements: x u8[28,28], y u8[] (0..9).
-- Looks in opts.dir when given, else in TPUTRAIN_DATA_DIR (or its fashion-mnist
-- subdirectory), else in /usr/share/datasets/fashion-mnist; files may be gzipped.
return function(split, opts)
  local names = type(split) == "string" and FILES[split]
  if not names then
    args.fail('fashion_mnist: unknown split %s (expected "train" or "test")', args.show(split))
  end
  opts = args.options(opts, "fashion_mnist", {"dir"})
  if opts.dir ~= nil and type(opts.dir) ~= "string" then
    args.fail("fashion_mnist: dir must be a directory name, got %s", args.show(opts.dir))
  end
  local dirs, origin = search_dirs(opts)
  local paths, missing = sources.find_files(dirs, names)
  if not paths then
    args.fail('fashion_mnist("%s"): cannot find %s (%s). Install the Debian package '
      .. "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or set "
      .. "TPUTRAIN_DATA_DIR to the directory holding these files", split, missing, origin)
  end
  local x, y = tpu.core.read_idx(paths[1]), tpu.core.read_idx(paths[2])
  check_shape(paths[1], x, {-1, 28, 28}, "u8[N,28,28] images")
  check_shape(paths[2], y, {x.shape[1]}, "u8[" .. x.shape[1] .. "] labels")
  return Dataset.SourceDataset(sources.TensorSource {x, y}, string.format("fashion_mnist(%q)", split))
end
