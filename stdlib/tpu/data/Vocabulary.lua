-- Vocabulary: text <-> integer ids for text models, at the level of characters or words.
--
--   local lines = data.text_lines("corpus.txt")
--   local vocab = data.Vocabulary.build(lines, {level = "char", min_count = 2, max_size = 200})
--   vocab:encode("hi there")          -- i32[8] tensor of ids
--   vocab:decode(vocab:encode("hi"))  -- "hi"
--   local ids = lines:map(function(s) return vocab:encode(s) end, {host = true})
--
-- Ids 0 and 1 are reserved: 0 is padding (padded_batch pads with 0 by default, and decode
-- skips it), 1 stands for unknown tokens. Tokens get ids 2, 3, ... by decreasing count, ties
-- in byte order, so a vocabulary built from the same text is always the same. Characters are
-- UTF-8 characters (bytes for text that is not valid UTF-8); words are runs of non-space
-- characters. {lower = true} lowercases ASCII letters first.
local class = require "tpu.class"
local args = require "tpu.data.args"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local Vocabulary = class("Vocabulary")

Vocabulary.PAD, Vocabulary.UNKNOWN = 0, 1
Vocabulary.PAD_TOKEN, Vocabulary.UNKNOWN_TOKEN = "<pad>", "<unk>"

local LEVELS = {char = true, word = true}

local function check_level(level, where)
  if level == nil then return "char" end
  if not LEVELS[level] then
    args.fail('%s: level must be "char" or "word", got %s', where, args.show(level))
  end
  return level
end

-- tokens: the list of distinct token strings, given ids 2, 3, ... in order.
-- opts: {level = "char" | "word", lower = false}.
function Vocabulary:__init(tokens, opts)
  opts = args.options(opts, "Vocabulary", {"level", "lower"})
  if type(tokens) ~= "table" then
    args.fail("Vocabulary: expected a list of tokens, got %s", args.show(tokens))
  end
  self.level = check_level(opts.level, "Vocabulary")
  self.lower = opts.lower ~= nil and args.boolean(opts.lower, "Vocabulary", "lower") or false
  self._tokens = {[0] = Vocabulary.PAD_TOKEN, [1] = Vocabulary.UNKNOWN_TOKEN}
  self._ids = {}
  for i, t in ipairs(tokens) do
    if type(t) ~= "string" or self._ids[t] then
      args.fail("Vocabulary: token %d must be a new string, got %s", i, args.show(t))
    end
    self._tokens[i + 1], self._ids[t] = t, i + 1
  end
end

Vocabulary.__tostring = function(self)
  return string.format("Vocabulary(%s, %d ids)", self.level, self:size())
end

-- Number of ids, the reserved 0 and 1 included.
function Vocabulary:size() return #self._tokens + 1 end
Vocabulary.__len = Vocabulary.size

-- An iterator over the tokens of a string.
function Vocabulary:_each(text)
  if type(text) ~= "string" then
    args.fail("Vocabulary: expected a string, got %s", args.show(text))
  end
  if self.lower then text = text:lower() end
  local pattern = self.level == "word" and "%S+" or utf8.len(text) and utf8.charpattern or "."
  return text:gmatch(pattern)
end

-- The tokens of a string, in order.
function Vocabulary:tokenize(text)
  local tokens = {}
  for t in self:_each(text) do tokens[#tokens + 1] = t end
  return tokens
end

function Vocabulary:id(token) return self._ids[token] or Vocabulary.UNKNOWN end

function Vocabulary:token(id)
  local t = math.type(id) == "integer" and self._tokens[id]
  if not t then
    args.fail("Vocabulary: id %s is out of range (0 .. %d)", args.show(id), self:size() - 1)
  end
  return t
end

-- The ids of a string's tokens as an i32[len] tensor (unknown tokens are 1); {max_len = n}
-- keeps the first n.
function Vocabulary:encode(text, opts)
  local max_len = math.maxinteger
  if opts ~= nil then
    opts = args.options(opts, "encode", {"max_len"})
    if opts.max_len ~= nil then max_len = args.integer(opts.max_len, "encode", "max_len", 0) end
  end
  local ids, n, known = {}, 0, self._ids
  for t in self:_each(text) do
    if n >= max_len then break end
    n = n + 1
    ids[n] = known[t] or Vocabulary.UNKNOWN
  end
  return tpu.tensor(ids, {dtype = "i32"})
end

-- The text of a list (or 1-D tensor) of ids; padding ids are skipped, unknown ones read
-- "<unk>". Characters are joined directly, words with spaces.
function Vocabulary:decode(ids)
  if tpu.is_tensor(ids) then
    if #ids.shape ~= 1 then args.fail("decode: expected a 1-D tensor of ids, got %s", args.show(ids)) end
    ids = ids:totable()
  end
  if type(ids) ~= "table" then args.fail("decode: expected a list of ids, got %s", args.show(ids)) end
  local parts = {}
  for _, id in ipairs(ids) do
    if id ~= Vocabulary.PAD then parts[#parts + 1] = self:token(math.tointeger(id) or id) end
  end
  return table.concat(parts, self.level == "word" and " " or "")
end

---------------------------------------------------------------- building

-- The strings of a list, or of the first component of a data set's elements.
local function each_string(texts, fn)
  if type(texts) == "table" and type(texts.iter) == "function" then
    for s in texts:iter() do
      if type(s) ~= "string" then
        args.fail("Vocabulary.build: the data set's elements must be strings, got %s", args.show(s))
      end
      fn(s)
    end
  elseif type(texts) == "table" then
    for i, s in ipairs(texts) do
      if type(s) ~= "string" then args.fail("Vocabulary.build: text %d is %s", i, args.show(s)) end
      fn(s)
    end
  else
    args.fail("Vocabulary.build: expected a list of strings or a data set of strings, got %s",
      args.show(texts))
  end
end

-- Tokens seen at least min_count times, most frequent first (ties in byte order), at most
-- max_size - 2 of them.
local function ranked(counts, min_count, max_size)
  local tokens = {}
  for t, c in pairs(counts) do
    if c >= min_count then tokens[#tokens + 1] = t end
  end
  table.sort(tokens, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return a < b
  end)
  for i = #tokens, (max_size or math.huge) - 1, -1 do tokens[i] = nil end
  return tokens
end

-- A vocabulary of the tokens of `texts` (a list of strings or a data set of strings).
-- opts: level ("char" default, or "word"), min_count (default 1), max_size (ids in all, the
-- two reserved ones included; default unlimited), lower (default false).
function Vocabulary.build(texts, opts, ...)
  if rawequal(texts, Vocabulary) then return Vocabulary.build(opts, ...) end  -- Vocabulary:build(texts)
  opts = args.options(opts, "Vocabulary.build", {"level", "min_count", "max_size", "lower"})
  local min_count = opts.min_count == nil and 1 or args.integer(opts.min_count, "Vocabulary.build", "min_count", 1)
  local max_size = opts.max_size and args.integer(opts.max_size, "Vocabulary.build", "max_size", 2)
  local vocab_opts = {level = check_level(opts.level, "Vocabulary.build"), lower = opts.lower}
  local probe = Vocabulary({}, vocab_opts)
  local counts = {}
  each_string(texts, function(s)
    for t in probe:_each(s) do counts[t] = (counts[t] or 0) + 1 end
  end)
  return Vocabulary(ranked(counts, min_count, max_size), vocab_opts)
end

return Vocabulary
