-- Sources read from numeric files into memory: IDX (idx), .npy (npy) and CSV (csv).
-- The parsers are C++ (engine/data); their errors name the file (and for CSV the line and
-- column) and start with the user's file:line.
local Dataset = require "tpu.data.Dataset"
local sources = require "tpu.data.sources"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local M = {}

-- A data set of the tensors read from `paths` (one component each, sharing the first
-- dimension); `kind` names the reader in messages.
local function from_files(kind, read, paths)
  local components, names = {}, {}
  for i, p in ipairs(paths) do
    if type(p) ~= "string" then
      args.fail("%s: expected a file name%s, got %s", kind, i > 1 and " for component " .. i or "",
        args.show(p))
    end
    components[i], names[i] = read(p), string.format("%q", p)
    local n, n1 = components[i].shape[1], components[1].shape[1]
    if i > 1 and n ~= n1 then
      args.fail("%s: %s holds %d examples but %s holds %d", kind, paths[1], n1, p, n)
    end
  end
  sources.check_components(components, kind)
  return Dataset.SourceDataset(sources.TensorSource(components), kind .. "(" .. table.concat(names, ", ") .. ")")
end

-- Reads an IDX file of examples and optionally one of labels (plain or .gz), as from_tensors.
function M.idx(images, labels)
  if labels ~= nil and type(labels) ~= "string" then
    args.fail("idx: expected a file name for the labels, got %s", args.show(labels))
  end
  local ds = from_files("idx", tpu.core.read_idx, {images, labels})
  if labels then
    ds._desc = string.format("idx(%q, %q)", images, labels)
  end
  return ds
end

-- Reads .npy files (one per component, e.g. npy("x.npy", "y.npy")), as from_tensors:
-- the first dimension counts the examples. Element types: float16/32/64 -> f32; int8..64,
-- uint16..64 -> i32 (values must fit); uint8 -> u8; bool -> bool. C order only.
function M.npy(path, ...)
  return from_files("npy", tpu.core.read_npy, {path, ...})
end

local CSV_OPTIONS = {"columns", "label", "label_classes", "dtype", "label_dtype", "header", "delimiter"}

local function check_column(v, what)
  if type(v) ~= "string" and not (math.type(v) == "integer" and v >= 1) then
    args.fail("csv: %s must be a column name or a 1-based column number, got %s", what, args.show(v))
  end
end

local function check_dtype(v, what)
  if v ~= nil and v ~= "f32" and v ~= "i32" then
    args.fail('csv: %s must be "f32" or "i32", got %s', what, args.show(v))
  end
end

local function csv_options(opts)
  opts = args.options(opts, "csv", CSV_OPTIONS)
  if opts.columns ~= nil then
    if type(opts.columns) ~= "table" or #opts.columns == 0 then
      args.fail("csv: columns must be a list of column names or numbers, got %s", args.show(opts.columns))
    end
    for i, c in ipairs(opts.columns) do check_column(c, "columns[" .. i .. "]") end
  end
  if opts.label ~= nil then check_column(opts.label, "label") end
  if opts.label_classes ~= nil then
    if type(opts.label_classes) ~= "table" or #opts.label_classes == 0 then
      args.fail("csv: label_classes must be a list of label names, got %s", args.show(opts.label_classes))
    end
    for i, c in ipairs(opts.label_classes) do args.string(c, "csv", "label_classes[" .. i .. "]") end
  end
  check_dtype(opts.dtype, "dtype")
  check_dtype(opts.label_dtype, "label_dtype")
  if opts.header ~= nil then args.boolean(opts.header, "csv", "header") end
  if opts.delimiter ~= nil and (type(opts.delimiter) ~= "string" or #opts.delimiter ~= 1) then
    args.fail("csv: delimiter must be one character, got %s", args.show(opts.delimiter))
  end
  return {features = opts.columns, label = opts.label, label_classes = opts.label_classes,
    feature_dtype = opts.dtype, label_dtype = opts.label_dtype, header = opts.header,
    delimiter = opts.delimiter}
end

-- Reads a CSV file of numbers. Elements are x (the chosen columns as one f32[k] vector, or
-- i32 with {dtype = "i32"}) and, when {label = name or number} is given, y (an i32 scalar,
-- or f32 with {label_dtype = "f32"}; with {label_classes = {"cat", "dog"}} the label column
-- holds those names and y is their 0-based index). Options: columns (names or 1-based
-- numbers; default every column but the label), header (default true: the first row names
-- the columns), delimiter (default ","). Parsing is strict: a malformed row is an error
-- naming file:line:column (see engine/data/csv.h).
function M.csv(path, opts, extra)
  errors.none(3, "csv", extra)
  args.string(path, "csv", "the file name")
  local x, y, names = tpu.core.read_csv(path, csv_options(opts))
  local ds = Dataset.SourceDataset(sources.TensorSource(y and {x, y} or {x}), string.format("csv(%q)", path))
  ds.feature_names = names
  return ds
end

return M
