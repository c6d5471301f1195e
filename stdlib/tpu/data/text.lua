-- Text sources: elements are Lua strings (one component), read into memory when the data set
-- is made. Turn them into tensors with a host map, e.g. with a Vocabulary:
--
--   local lines = data.text_lines("corpus.txt")                   -- "first line", ...
--   local vocab = data.Vocabulary.build(lines, {level = "char"})
--   local ids = lines:map(function(s) return vocab:encode(s) end, {host = true})
local Dataset = require "tpu.data.Dataset"
local sources = require "tpu.data.sources"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local M = {}

-- A file name or a list of them, checked.
local function path_list(paths, where)
  if type(paths) == "string" then return {paths} end
  if type(paths) ~= "table" or #paths == 0 then
    args.fail("%s: expected a file name or a list of file names, got %s", where, args.show(paths))
  end
  for i, p in ipairs(paths) do
    if type(p) ~= "string" then args.fail("%s: file name %d is %s", where, i, args.show(p)) end
  end
  return paths
end

-- The lines of a file, without their "\n" (or "\r\n").
local function read_lines(path, where)
  local f, err = io.open(path, "rb")
  if not f then args.fail("%s: cannot open %s", where, err) end
  local text, read_err = f:read("a")
  f:close()
  if not text then args.fail("%s: cannot read %s: %s", where, path, read_err) end
  if #text > 0 and text:sub(-1) ~= "\n" then text = text .. "\n" end
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line:gsub("\r$", "") end
  return lines
end

local function string_dataset(strings, desc)
  local elements = {}
  for i, s in ipairs(strings) do elements[i] = {s} end
  local spec = function() return {structure.spec_leaf({}, "string")} end
  return Dataset.SourceDataset(sources.ListSource(elements, spec), desc)
end

local function describe(name, paths, extra)
  local shown = #paths == 1 and string.format("%q", paths[1]) or "{" .. #paths .. " files}"
  return name .. "(" .. shown .. (extra or "") .. ")"
end

-- One element per line of the file(s): a Lua string without the line break. Empty lines are
-- elements too ("").
function M.text_lines(paths, extra)
  errors.none(2, "text_lines", extra)
  paths = path_list(paths, "text_lines")
  local strings = {}
  for _, p in ipairs(paths) do
    for _, line in ipairs(read_lines(p, "text_lines")) do strings[#strings + 1] = line end
  end
  return string_dataset(strings, describe("text_lines", paths))
end

-- Records of the lines between separator lines, joined with "\n".
local function records_of(lines, separator, out)
  local current = {}
  local function flush()
    local text = table.concat(current, "\n")
    if text:find("%S") then out[#out + 1] = text end
    current = {}
  end
  for _, line in ipairs(lines) do
    if line == separator then flush() else current[#current + 1] = line end
  end
  flush()
end

-- One element per record of the file(s): the text between lines that hold only the separator
-- (default "%", as in fortune files), its lines joined with "\n". Blank records are skipped.
function M.text_records(paths, opts, extra)
  errors.none(3, "text_records", extra)
  paths = path_list(paths, "text_records")
  opts = args.options(opts, "text_records", {"separator"})
  local separator = opts.separator == nil and "%" or args.string(opts.separator, "text_records", "separator")
  local strings = {}
  for _, p in ipairs(paths) do records_of(read_lines(p, "text_records"), separator, strings) end
  return string_dataset(strings, describe("text_records", paths,
    string.format(", {separator = %q}", separator)))
end

-- Whether a directory entry is a fortune file (not an index .dat, not a .u8 alias).
local function is_fortune_file(name)
  return not (name:match("%.dat$") or name:match("%.u8$") or name:match("^%."))
end

local function is_directory(path)
  local ok = pcall(tpu.core.regular_files, path)
  return ok
end

-- Fortune cookies, one element per cookie: text_records with separator "%". Each argument
-- item is a fortune file or a directory, whose regular files are all read (sorted by name;
-- not its subdirectories, symbolic links, or the .dat index files). The Debian packages
-- fortunes, fortunes-de, -it, -es and -br install them under /usr/share/games/fortunes.
function M.fortunes(paths, extra)
  errors.none(2, "fortunes", extra)
  paths = path_list(paths, "fortunes")
  local files = {}
  for _, p in ipairs(paths) do
    if is_directory(p) then
      for _, name in ipairs(tpu.core.regular_files(p)) do
        if is_fortune_file(name) then files[#files + 1] = p .. "/" .. name end
      end
    else
      files[#files + 1] = p
    end
  end
  if #files == 0 then args.fail("fortunes: no fortune files in %s", table.concat(paths, ", ")) end
  local ds = M.text_records(files, {separator = "%"})
  ds._desc = describe("fortunes", paths)
  return ds
end

return M
