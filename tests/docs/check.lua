-- Checks the reference in docs/: `tputrain tests/docs/check.lua TPUTRAIN DOCS_DIR`.
--  1. Every ```lua example runs in a fresh interpreter and prints exactly the ```output block
--     that follows it (nothing when there is none): the examples are written as golden scripts
--     into a temporary directory and run by `TPUTRAIN test`, so times are masked the same way.
--  2. Every public name a module exports has an entry (a `### ` heading naming it in backticks)
--     on its page, except the names listed in tests/docs/undocumented.txt; a listed name that has
--     an entry, or that no longer exists, is an error too, so the list only shrinks. Public
--     means without a leading underscore, and covers the functions of the classes too: those of
--     every layer class, data set, optimizer and callback class, not only of their base class.
-- Ends with "N passed, N failed" (one test per example, one per surface and one for the list).
local tpu = require "tpu"

local exe, docs = arg[1], arg[2]
if not exe or not docs then
  io.stderr:write("usage: tputrain tests/docs/check.lua TPUTRAIN DOCS_DIR\n")
  os.exit(2)
end
local here = arg[0]:match("^(.*)/[^/]*$") or "."

---------------------------------------------------------------------------------------------
-- What must be documented. One row per surface: the page, the prefix its headings use, and the
-- names that need an entry. A new module is one more row, e.g.
--   {"applications.md", "applications.", module "applications"},
---------------------------------------------------------------------------------------------

-- Plumbing that other parts of the stdlib call; not part of what a script writes. A helper of
-- one class or module is better named with a leading underscore (Dropout._apply), which every
-- surface below skips; this list keeps the class machinery (extend, is_instance) and the
-- classes fit uses internally.
local internal = {}
for name in ([[
  tpu.class tpu.core tpu.options tpu.version nn.Progbar nn.History
  history:extend history:is_instance model:is_instance
  Progbar:update Progbar:extend Progbar:is_instance
  Dataset:extend Dataset:is_instance Vocabulary:extend Vocabulary:is_instance
  Optimizer:extend Optimizer:is_instance strategy:extend strategy:is_instance
  Callback:extend Callback:is_instance symbolic:extend symbolic:is_instance
]]):gmatch("%S+") do internal[name] = true end

-- Fields documented beside a surface's functions (their headings would otherwise look stale).
local fields = {}
for name in ([[
  strategy.num_replicas_in_sync data.Vocabulary.build
]]):gmatch("%S+") do fields[name] = true end

local function sorted(set)
  local list = {}
  for name in pairs(set) do list[#list + 1] = name end
  table.sort(list)
  return list
end

-- A namespace (nn.initializers, optim.schedule) is a table of functions; anything else is one name.
local is_namespace = dofile(here .. "/../lua/namespace.lua")

-- The public names of tpu[name]: functions, classes, constants, and the functions of plain
-- tables inside it (nn.initializers.zeros).
local function module(name)
  return function()
    local names = {}
    local function walk(t, prefix)
      for k, v in pairs(t) do
        if type(k) == "string" and not k:match("^_") then
          if is_namespace(v) then walk(v, prefix .. k .. ".")
          else names[prefix .. k] = true end
        end
      end
    end
    walk(tpu[name], name .. ".")
    return names
  end
end

-- The classes that derive from `base` among the loaded modules and their fields (the transforms
-- of tpu.data): a method only a subclass defines (Dataset:prefetch_stats) is public too.
local function subclasses(base)
  return function()
    local found, seen = {}, {}
    local function consider(c)
      if type(c) ~= "table" or seen[c] or c == base then return end
      seen[c] = true
      local up = rawget(c, "super")
      while type(up) == "table" do
        if up == base then found[#found + 1] = c return end
        up = rawget(up, "super")
      end
    end
    for _, m in pairs(package.loaded) do
      consider(m)
      if type(m) == "table" and not getmetatable(m) then
        for _, v in pairs(m) do consider(v) end
      end
    end
    for _, v in pairs(base) do consider(v) end
    return found
  end
end

-- The methods of classes (with what they inherit), under `prefix`; a function argument gives a
-- list of classes (subclasses(base)).
local function methods(prefix, ...)
  local classes = {}
  for _, c in ipairs {...} do
    if type(c) == "function" then
      for _, sub in ipairs(c()) do classes[#classes + 1] = sub end
    else
      classes[#classes + 1] = c
    end
  end
  return function()
    local names = {}
    for _, cls in ipairs(classes) do
      while cls do
        for k, v in pairs(cls) do
          if type(k) == "string" and type(v) == "function" and not k:match("^_") then names[prefix .. k] = true end
        end
        cls = cls.super
      end
    end
    return names
  end
end

-- Top-level functions of `tpu`, less the tensor methods (tensor.md) and the submodules.
local function top_level()
  local names = {}
  for k, v in pairs(tpu) do
    if type(k) == "string" and not k:match("^_") and type(v) ~= "table" and not tpu.core.Tensor[k] then
      names["tpu." .. k] = true
    end
  end
  return names
end

-- What a custom layer defines or calls (nn.md, as Module:NAME); the rest is model.md's.
local layer_api = {add_weight = true, build = true, call = true, compute_output_shape = true,
                   random_key = true, update_state = true, extend = true, compute_dtype = true,
                   variable_dtype = true, regularization_loss = true, init_common = true,
                   maybe_build = true, repr = true}
local function split_methods(want_layer_api, prefix)
  local all = methods("", tpu.nn.Sequential, tpu.nn.Model)
  return function()
    local names = {}
    for name in pairs(all()) do
      if (layer_api[name] ~= nil) == want_layer_api then names[prefix .. name] = true end
    end
    return names
  end
end

-- The functions that layer classes (nn.Dense, ..., and any other subclass of nn.Module) define
-- beyond the names of Module, Sequential and Model (the Module: and model: surfaces), as
-- `layer:NAME` (Normalization's layer:adapt): a layer's own helper needs an entry or a leading
-- underscore.
local function layer_methods()
  local shared = methods("", tpu.nn.Sequential, tpu.nn.Model)()
  local names = {}
  for _, cls in ipairs(subclasses(tpu.nn.Module)()) do
    for k, v in pairs(cls) do
      if type(k) == "string" and type(v) == "function" and not k:match("^_") and not shared[k] then
        names["layer:" .. k] = true
      end
    end
  end
  return names
end

-- The C API: every function interpreter/tputrain.h declares (a line that starts with its type).
local function c_api()
  local names = {}
  local f = assert(io.open(here .. "/../../interpreter/tputrain.h"))
  for name in ("\n" .. f:read("a")):gmatch("\n%a[%w_ ]*[%s%*]+([%w_]+)%(") do names[name] = true end
  f:close()
  return names
end

-- The command line (cli.md): the options `TPUTRAIN --help` lists (`--cores`, `-e`, `--`), and
-- the environment variables it lists or that the sources read (getenv "TPUTRAIN_...").
local function cli_options()
  local names = {}
  local p = assert(io.popen("'" .. exe .. "' --help"))
  for line in p:lines() do
    local opts = line:match("^  (%-.-)%s%s")
    if opts then
      for name in opts:gmatch("%-%-?[%w-]+") do names[name] = true end
    end
  end
  p:close()
  return names
end
local function environment()
  local names = {}
  local p = assert(io.popen("'" .. exe .. "' --help"))
  for line in p:lines() do
    local name = line:match("^  (TPUTRAIN_[%u%d_]+)=")
    if name then names[name] = true end
  end
  p:close()
  local src = here .. "/../.."
  p = assert(io.popen("grep -rhoE 'getenv\\(\"TPUTRAIN_[A-Z0-9_]+' '" .. src .. "/interpreter' '" .. src
    .. "/engine' '" .. src .. "/stdlib'"))
  for line in p:lines() do names[line:match("TPUTRAIN_[%u%d_]+")] = true end
  p:close()
  return names
end

local surfaces = {
  {"tpu.md", "tpu.", top_level},
  {"tensor.md", "Tensor:", methods("Tensor:", tpu.core.Tensor)},
  {"nn.md", "nn.", module "nn"},
  {"nn.md", "Module:", split_methods(true, "Module:")},
  {"nn.md", "layer:", layer_methods},
  {"nn.md", "symbolic:", methods("symbolic:", require "tpu.nn.Node")},  -- what nn.Input returns
  {"model.md", "model:", split_methods(false, "model:")},
  {"model.md", "history:", methods("history:", tpu.nn.History)},
  {"model.md", "Progbar:", methods("Progbar:", tpu.nn.Progbar)},
  {"data.md", "data.", module "data"},
  {"data.md", "Dataset:", methods("Dataset:", tpu.data.Dataset, subclasses(tpu.data.Dataset))},
  {"data.md", "Vocabulary:", methods("Vocabulary:", tpu.data.Vocabulary)},
  {"optim.md", "optim.", module "optim"},
  {"optim.md", "Optimizer:", methods("Optimizer:", tpu.optim.Optimizer, subclasses(tpu.optim.Optimizer))},
  {"losses.md", "losses.", module "losses"},
  {"metrics.md", "metrics.", module "metrics"},
  {"callbacks.md", "callbacks.", module "callbacks"},
  {"callbacks.md", "Callback:", methods("Callback:", tpu.callbacks.Callback, subclasses(tpu.callbacks.Callback))},
  {"strategy.md", "strategy.", module "strategy"},
  {"strategy.md", "strategy:", methods("strategy:", tpu.strategy.Strategy, subclasses(tpu.strategy.Strategy))},
  {"random.md", "random.", module "random"},
  {"mixed_precision.md", "mixed_precision.", module "mixed_precision"},
  {"checkpoint.md", "checkpoint.", module "checkpoint"},
  {"applications.md", "applications.", module "applications"},
  {"image.md", "image.", module "image"},
  {"plot.md", "plot.", module "plot"},
  {"cli.md", "-", cli_options},
  {"cli.md", "TPUTRAIN_", environment},
  {"embedding.md", "", c_api},
}

---------------------------------------------------------------------------------------------
-- Reading the pages
---------------------------------------------------------------------------------------------

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The names a heading documents: each `call` in backticks, cut before its arguments (an option,
-- `--cores N`, before its value).
local function heading_names(line)
  local names = {}
  for code in line:gmatch("`([^`]+)`") do
    names[#names + 1] = code:match("^[%w_.:]+") or code:match("^%-%-?[%w-]*")
  end
  return names
end

-- Parses one page: its documented names and its examples {name, lua, output, line}.
local function parse_page(page, text, problems)
  local documented, examples = {}, {}
  local block, lang, start, heading = nil, nil, 0, "intro"
  local last_example, blank_since_example = nil, true
  local lineno = 0
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    if block then
      if line:match("^```%s*$") then
        local body = table.concat(block, "\n") .. (#block > 0 and "\n" or "")
        if lang == "lua" then
          last_example = {heading = heading, lua = body,
                          output = "", where = page .. ":" .. start}
          examples[#examples + 1] = last_example
          blank_since_example = true
        elseif lang == "output" then
          if not last_example or not blank_since_example then
            problems[#problems + 1] = page .. ":" .. start .. ": an ```output block must follow a ```lua example"
          else
            last_example.output = body
          end
          last_example = nil
        end
        block = nil
      else
        block[#block + 1] = line
      end
    elseif line:match("^```") then
      lang, block, start = line:match("^```%s*(%S*)"), {}, lineno
      if lang ~= "output" then last_example = nil end
    else
      if line:match("%S") then blank_since_example = false end
      if line:match("^### ") then
        local names = heading_names(line)
        if #names == 0 then
          problems[#problems + 1] = page .. ":" .. lineno .. ": an entry's heading names its call in backticks"
        end
        for _, n in ipairs(names) do documented[n] = true end
        heading = names[1] or "entry"
      end
    end
  end
  if block then problems[#problems + 1] = page .. ":" .. start .. ": unclosed ``` block" end
  return documented, examples
end

---------------------------------------------------------------------------------------------
-- Checking
---------------------------------------------------------------------------------------------

local passed, failed = 0, 0
local function verdict(ok, label, detail)
  if ok then passed = passed + 1
  else
    failed = failed + 1
    print("FAIL " .. label .. (detail and (":\n" .. detail) or ""))
  end
end

local index = read(docs .. "/README.md")
verdict(index ~= nil, "docs/README.md", "missing")

local pages, problems, all_examples = {}, {}, {}
for _, s in ipairs(surfaces) do pages[s[1]] = true end
for page in pairs(pages) do
  local text = read(docs .. "/" .. page)
  if not text then
    problems[#problems + 1] = "docs/" .. page .. " is missing"
    pages[page] = {}
  else
    local documented, examples = parse_page(page, text, problems)
    pages[page] = documented
    for _, e in ipairs(examples) do all_examples[#all_examples + 1] = e end
    if index and not index:find("(" .. page .. ")", 1, true) then
      problems[#problems + 1] = "docs/README.md does not link " .. page
    end
  end
end
verdict(#problems == 0, "page format", table.concat(problems, "\n"))

-- The allow-list: names still without an entry.
local allowed = {}
for line in (read(here .. "/undocumented.txt") or ""):gmatch("[^\n]+") do
  local name = line:match("^%s*([^#%s]+)")
  if name then allowed[name] = true end
end

local exported = {}
for _, s in ipairs(surfaces) do
  local page, prefix, names = s[1], s[2], s[3]()
  local missing, stale = {}, {}
  for _, name in ipairs(sorted(names)) do
    exported[name] = true
    -- A function called with a dot is documented so: Optimizer.like(s, p) for Optimizer:like.
    local documented = pages[page][name] or pages[page][(name:gsub(":", ".", 1))]
    if not internal[name] and not documented and not allowed[name] then missing[#missing + 1] = name end
  end
  for name in pairs(pages[page]) do
    if name:sub(1, #prefix) == prefix and not names[name] and not fields[name] then stale[#stale + 1] = name end
  end
  table.sort(stale)
  local detail = {}
  if #missing > 0 then detail[#detail + 1] = "  no entry in docs/" .. page .. " for: " .. table.concat(missing, ", ") end
  if #stale > 0 then detail[#detail + 1] = "  docs/" .. page .. " documents names that do not exist: " .. table.concat(stale, ", ") end
  verdict(#detail == 0, "coverage of " .. prefix .. " (docs/" .. page .. ")", table.concat(detail, "\n"))
end

local documented_any = {}
for _, s in ipairs(surfaces) do
  for name in pairs(pages[s[1]]) do documented_any[name] = true end
end
local list_problems = {}
for _, name in ipairs(sorted(allowed)) do
  if documented_any[name] then
    list_problems[#list_problems + 1] = "  " .. name .. " has an entry now: remove it from tests/docs/undocumented.txt"
  elseif not exported[name] or internal[name] then
    list_problems[#list_problems + 1] = "  " .. name .. " is not an exported name: remove it from tests/docs/undocumented.txt"
  end
end
verdict(#list_problems == 0, "tests/docs/undocumented.txt", table.concat(list_problems, "\n"))

-- The examples, run by the golden runner: each as example.lua in a directory of its own (also its
-- working directory), so its errors read "example.lua:LINE:" and the files it writes go away.
local dir = dofile(here .. "/../lua/files.lua").tmpdir()  -- removed at exit, also after an error
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end
local paths = {}
for i, e in ipairs(all_examples) do
  local sub = string.format("%s/%04d", dir, i)
  assert(os.execute("mkdir '" .. sub .. "'"))
  write(sub .. "/example.lua", e.lua)
  write(sub .. "/example.out", e.output)
  paths[#paths + 1] = "'" .. sub .. "/example.lua'"
end
local ex_passed, ex_failed, k = 0, 0, 0
if #paths > 0 then
  local runner = assert(io.popen("'" .. exe .. "' test " .. table.concat(paths, " ") .. " 2>&1"))
  for line in runner:lines() do
    local p, f = line:match("^(%d+) passed, (%d+) failed$")
    if p then
      ex_passed, ex_failed = tonumber(p), tonumber(f)
    elseif line:match("^ok example$") then
      k = k + 1
    elseif line:match("^FAIL example ") then
      -- The runner reports in the order of the paths: name the page and line of the example.
      k = k + 1
      print((line:gsub("^FAIL example", "FAIL docs/" .. all_examples[k].where .. " (" .. all_examples[k].heading .. ")")))
    else
      print(line)
    end
  end
  runner:close()
end
os.execute("rm -rf '" .. dir .. "'")
if ex_passed + ex_failed ~= #all_examples then
  verdict(false, "examples", string.format("the runner reported %d of %d examples", ex_passed + ex_failed, #all_examples))
end
passed, failed = passed + ex_passed, failed + ex_failed
print(string.format("%d examples, %d surfaces, %d names still undocumented",
  #all_examples, #surfaces, #sorted(allowed)))
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
