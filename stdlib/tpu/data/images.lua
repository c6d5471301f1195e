-- data.image_folder: a directory of JPEG and PNG files, one class per subdirectory, as Keras's
-- image_dataset_from_directory. The files are listed (and their headers checked) once; an
-- image is decoded and resized when a batch is gathered, on the prefetch thread under
-- prefetch(n) (engine/data/image_folder.h).
--
--   local train = data.image_folder("flowers", {image_size = {64, 64}, validation_split = 0.2,
--     subset = "training", seed = 1}):batch(32):prefetch(2)
--   for x, y in train:iter() do ... end      -- x f32[32,64,64,3] (0..255), y i32[32]
local Dataset = require "tpu.data.Dataset"
local class = require "tpu.class"
local random = require "tpu.data.random"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local M = {}

---------------------------------------------------------------- the source

-- The images (and labels) of a list of files, decoded on demand by a C++ reader.
local ImageSource = class("ImageSource")
M.ImageSource = ImageSource

-- reader: core.image_batch_reader; n: its file count; spec: one spec leaf per component.
function ImageSource:__init(reader, n, spec)
  self._reader, self.n, self._spec = reader, n, spec
  self.arity = #spec
end

function ImageSource:gather(indices) return self._reader:read(indices) end

function ImageSource:get(i)
  return structure.map(self:gather({i}), function(t)
    local shape = t.shape
    table.remove(shape, 1)
    return t:reshape(shape)
  end)
end

function ImageSource:spec() return self._spec end

-- The background decoder of prefetch (tpu.data.prefetching): batches come back as lists.
function ImageSource:prefetcher(depth) return tpu.core.batch_prefetcher(self._reader, depth) end
function ImageSource:from_leaves(leaves) return leaves end

---------------------------------------------------------------- options

local OPTIONS = {"image_size", "color", "color_mode", "labels", "label_mode", "class_names", "shuffle",
  "seed", "validation_split", "subset", "on_error", "antialias", "verbose"}

local CHANNELS = {grayscale = 1, rgb = 3, rgba = 4}

local function one_of(v, what, choices)
  for _, c in ipairs(choices) do
    if v == c then return v end
  end
  args.fail("image_folder: %s must be %s, got %s", what, table.concat(choices, ", "), args.show(v))
end

local function image_size(v)
  if v == nil then return {256, 256} end  -- Keras's default
  if type(v) ~= "table" or #v ~= 2 or math.type(v[1]) ~= "integer" or math.type(v[2]) ~= "integer"
      or v[1] < 1 or v[2] < 1 then
    args.fail("image_folder: image_size must be {height, width} (positive integers), got %s", args.show(v))
  end
  return {v[1], v[2]}
end

local function check_split(o)
  if o.validation_split == nil and o.subset == nil then return end
  if o.validation_split == nil or o.subset == nil then
    args.fail("image_folder: validation_split and subset go together, e.g. {validation_split = 0.2, "
      .. "subset = \"training\"}")
  end
  local v = o.validation_split
  if type(v) ~= "number" or v <= 0 or v >= 1 then
    args.fail("image_folder: validation_split must be a number between 0 and 1, got %s", args.show(v))
  end
  one_of(o.subset, "subset", {"training", "validation", "both"})
end

local function check_labels(o)
  local labels = o.labels
  if labels == nil then labels = "inferred" end
  if labels ~= "inferred" and labels ~= false and type(labels) ~= "table" then
    args.fail("image_folder: labels must be \"inferred\", false (no labels) or a list of integer "
      .. "labels, got %s", args.show(labels))
  end
  if o.class_names ~= nil then
    if labels ~= "inferred" then
      args.fail("image_folder: class_names only goes with labels = \"inferred\"")
    end
    if type(o.class_names) ~= "table" or #o.class_names == 0 then
      args.fail("image_folder: class_names must be a list of subdirectory names, got %s", args.show(o.class_names))
    end
  end
  return labels
end

local function read_options(opts)
  local o = args.options(opts, "image_folder", OPTIONS)
  if o.color ~= nil and o.color_mode ~= nil then
    args.fail("image_folder: give color or its Keras name color_mode, not both")
  end
  local color = one_of(o.color or o.color_mode or "rgb", "color", {"rgb", "grayscale", "rgba"})
  local r = {size = image_size(o.image_size), channels = CHANNELS[color], labels = check_labels(o),
    label_mode = one_of(o.label_mode or "int", "label_mode", {"int", "categorical", "binary"}),
    on_error = one_of(o.on_error or "error", "on_error", {"error", "skip"}),
    class_names = o.class_names, split = o.validation_split, subset = o.subset}
  for _, k in ipairs {"shuffle", "antialias", "verbose"} do
    r[k] = o[k] == nil or args.boolean(o[k], "image_folder", k)
  end
  if o.verbose == nil and (package.loaded["tpu.options"] or {}).quiet then r.verbose = false end  -- --quiet
  -- Without a seed, the default one (as shuffle's), so the training and validation subsets of
  -- one run always come from the same permutation.
  r.seed = o.seed == nil and random.default_seed() or args.integer(o.seed, "image_folder", "seed")
  check_split(o)
  return r
end

---------------------------------------------------------------- the listing

-- class_names in the user's order: the files regrouped by class in that order (each class's
-- files keep their order).
local function reorder_classes(dir, listing, class_names)
  local found, position = {}, {}
  for i, name in ipairs(listing.class_names) do found[name] = i - 1 end
  local ok = #class_names == #listing.class_names
  for i, name in ipairs(class_names) do
    ok = ok and found[name] ~= nil and position[name] == nil
    position[name] = i - 1
  end
  if not ok then
    args.fail("image_folder: class_names must name each subdirectory of %s once; it has %s, got %s",
      dir, args.show(listing.class_names), args.show(class_names))
  end
  local order = {}
  for i = 1, #listing.paths do order[i] = i end
  local remap = {}
  for name, old in pairs(found) do remap[old] = position[name] end
  table.sort(order, function(a, b)
    local la, lb = remap[listing.labels[a]], remap[listing.labels[b]]
    if la ~= lb then return la < lb end
    return a < b
  end)
  local paths, labels = {}, {}
  for i, k in ipairs(order) do paths[i], labels[i] = listing.paths[k], remap[listing.labels[k]] end
  return {class_names = class_names, paths = paths, labels = labels}
end

local function list_files(dir, o)
  local names, paths, labels = tpu.core.list_image_folder(dir, o.labels == "inferred")
  local listing = {class_names = names, paths = paths, labels = labels}
  if #paths == 0 then
    args.fail("image_folder: no images in %s (JPEG and PNG files%s)", dir,
      o.labels == "inferred" and ", one subdirectory per class" or "")
  end
  if o.class_names then listing = reorder_classes(dir, listing, o.class_names) end
  if type(o.labels) == "table" then
    if #o.labels ~= #paths then
      args.fail("image_folder: labels has %d entries but %s holds %d images", #o.labels, dir, #paths)
    end
    local most = 0
    for i, l in ipairs(o.labels) do
      listing.labels[i] = args.integer(l, "image_folder", "labels[" .. i .. "]", 0)
      most = math.max(most, l)
    end
    listing.num_classes = most + 1
  end
  listing.num_classes = listing.num_classes or #listing.class_names
  return listing
end

-- Drops the files that do not decode (on_error = "skip"), or raises the first header that
-- does not read (the default: a full decode of every file would cost a pass over the data).
local function check_files(listing, o)
  local keep_paths, keep_labels, skipped, first = {}, {}, 0, nil
  local candidates = #listing.paths
  for i, path in ipairs(listing.paths) do
    local problem = tpu.core.image_problem(path, o.on_error == "skip")
    if problem and o.on_error == "error" then
      args.fail("image_folder: %s (pass {on_error = \"skip\"} to leave such files out)", problem)
    elseif problem then
      skipped, first = skipped + 1, first or problem
    else
      keep_paths[#keep_paths + 1], keep_labels[#keep_labels + 1] = path, listing.labels[i]
    end
  end
  listing.paths, listing.labels, listing.skipped = keep_paths, keep_labels, skipped
  if skipped > 0 and o.verbose then
    print(string.format("Skipped %d of %d files, which do not decode (the first: %s).", skipped,
      candidates, first))
  end
  if #keep_paths == 0 then args.fail("image_folder: none of the images decodes (the first: %s)", first) end
end

-- The same permutation of paths and labels for a seed (Fisher-Yates).
local function shuffle_files(listing, seed)
  local below, paths, labels = random.stream(seed, 0), listing.paths, listing.labels
  for i = #paths, 2, -1 do
    local j = below(i) + 1
    paths[i], paths[j] = paths[j], paths[i]
    if #labels > 0 then labels[i], labels[j] = labels[j], labels[i] end
  end
end

---------------------------------------------------------------- data sets

local function label_spec(o, num_classes)
  if o.labels == false then return nil end
  if o.label_mode == "int" then return structure.spec_leaf({}, "i32") end
  return structure.spec_leaf({o.label_mode == "binary" and 1 or num_classes}, "f32")
end

-- The files first .. last of the listing as a data set.
local function subset_dataset(dir, listing, o, first, last, what)
  local paths, labels = {}, {}
  for i = first, last do
    paths[#paths + 1] = listing.paths[i]
    if #listing.labels > 0 then labels[#labels + 1] = listing.labels[i] end
  end
  local mode = o.labels == false and "none" or o.label_mode
  local reader = tpu.core.image_batch_reader(paths, mode ~= "none" and labels or nil, o.size[1], o.size[2],
    o.channels, o.antialias, mode, listing.num_classes)
  local spec = {structure.spec_leaf({o.size[1], o.size[2], o.channels}, "f32"), label_spec(o, listing.num_classes)}
  local desc = string.format("image_folder(%q%s)", dir, what and ", " .. what or "")
  local ds = Dataset.SourceDataset(ImageSource(reader, #paths, spec), desc)
  if o.shuffle then ds = ds:shuffle(#paths, {seed = o.seed}) end
  ds.class_names, ds.file_paths, ds.skipped = listing.class_names, paths, listing.skipped
  return ds
end

local function found_message(listing, o)
  if not o.verbose then return end
  local n, k = #listing.paths, #listing.class_names
  if o.labels == "inferred" then
    print(string.format("Found %d files belonging to %d classes.", n, k))
  else
    print(string.format("Found %d files.", n))
  end
end

-- Reads a directory of images; see the top of this file and docs/data.md.
function M.image_folder(dir, opts, extra)
  errors.none(3, "image_folder", extra)
  args.string(dir, "image_folder", "the directory")
  local o = read_options(opts)
  local listing = list_files(dir, o)
  if o.label_mode == "binary" and listing.num_classes ~= 2 then
    args.fail("image_folder: label_mode = \"binary\" needs exactly 2 classes, %s has %d", dir, listing.num_classes)
  end
  check_files(listing, o)
  found_message(listing, o)
  if o.shuffle then shuffle_files(listing, o.seed) end
  local n = #listing.paths
  if not o.split then return subset_dataset(dir, listing, o, 1, n) end
  local n_val = math.floor(o.split * n)
  if n_val == 0 or n_val == n then
    args.fail("image_folder: validation_split = %s of %d images leaves an empty subset", args.show(o.split), n)
  end
  local train = o.subset ~= "validation" and subset_dataset(dir, listing, o, 1, n - n_val, "training")
  local val = o.subset ~= "training" and subset_dataset(dir, listing, o, n - n_val + 1, n, "validation")
  if o.verbose and o.subset ~= "validation" then print(string.format("Using %d files for training.", n - n_val)) end
  if o.verbose and o.subset ~= "training" then print(string.format("Using %d files for validation.", n_val)) end
  if o.subset == "both" then return train, val end
  return train or val
end

return M
