-- tpu.data text: text_lines, text_records, fortunes, Vocabulary and host maps.
local tpu = require "tpu"
local data = tpu.data
local check = require "check"
local util = require "data_util"
local collect = util.collect

local tests = {}

local FORTUNES = "/usr/share/games/fortunes"

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

---------------------------------------------------------------- sources

tests["text_lines yields one Lua string per line"] = function()
  local dir = util.temp_dir()
  local a = util.write(dir .. "/a.txt", "first line\r\n\nthird\n")
  local b = util.write(dir .. "/b.txt", "no newline at the end")
  local ds = data.text_lines(a)
  check.eq(collect(ds), {"first line", "", "third"})
  check.eq(ds:cardinality(), 3)
  local spec = ds:element_spec()
  check.eq(spec.dtype, "string")
  check.eq(tostring(spec), "string")
  check.eq(collect(data.text_lines {a, b}), {"first line", "", "third", "no newline at the end"})
  check.eq(collect(data.text_lines(util.write(dir .. "/empty.txt", ""))), {})
  check.eq(tostring((data.text_lines(util.write(dir .. "/e2.txt", "")):element_spec())), "string")
  -- In memory: shuffle, skip, shard and take work on indices.
  local shuffled = collect(ds:shuffle(3, {seed = 1}))
  table.sort(shuffled)
  check.eq(shuffled, {"", "first line", "third"})
  check.eq(collect(ds:skip(1):take(1)), {""})
  check.eq(collect(ds:shard(2, 1)), {""})
  check.eq(collect(ds:filter(function(s) return #s > 0 end)), {"first line", "third"})
  check.raises(function() data.text_lines(dir .. "/missing.txt") end, "text_lines: cannot open " .. dir .. "/missing.txt")
  check.raises(function() data.text_lines(7) end, "text_lines: expected a file name or a list of file names, got 7")
  check.raises(function() data.text_lines {a, false} end, "text_lines: file name 2 is false")
  util.remove(dir)
end

tests["text_records splits at separator lines"] = function()
  local dir = util.temp_dir()
  local path = util.write(dir .. "/cookies", "%\nOne\nline two\n%\n%\n  \n%\nThree\n%")
  check.eq(collect(data.text_records(path)), {"One\nline two", "Three"})
  local other = util.write(dir .. "/other", "a\n--\nb\n")
  local ds = data.text_records(other, {separator = "--"})
  check.eq(collect(ds), {"a", "b"})
  check.eq(tostring(ds), 'Dataset text_records("' .. other .. '", {separator = "--"})')
  check.raises(function() data.text_records(other, {separator = 1}) end, "text_records: separator must be a string, got 1")
  check.raises(function() data.text_records(other, {sep = "%"}) end, 'text_records: unknown option "sep"')
  util.remove(dir)
end

tests["fortunes reads a directory of fortune files"] = function()
  local dir = util.temp_dir()
  util.write(dir .. "/b_jokes", "Joke one.\n%\nJoke two.\n%\n")
  util.write(dir .. "/a_wisdom", "Be kind.\n%\n")
  util.write(dir .. "/a_wisdom.dat", "\0\0\0\2binary index")
  os.execute("ln -s a_wisdom '" .. dir .. "/a_wisdom.u8'")
  os.execute("ln -s b_jokes '" .. dir .. "/alias'")
  os.execute("mkdir '" .. dir .. "/off'")
  util.write(dir .. "/off/rude", "Not read.\n%\n")
  local ds = data.fortunes(dir)
  check.eq(collect(ds), {"Be kind.", "Joke one.", "Joke two."})
  check.eq(tostring(ds), 'Dataset fortunes("' .. dir .. '")')
  check.eq(collect(data.fortunes {dir .. "/b_jokes"}), {"Joke one.", "Joke two."})
  check.raises(function() data.fortunes(dir .. "/off/nothing") end, "cannot open")
  util.remove(dir)
end

tests["fortunes from the Debian packages"] = function()
  if not exists(FORTUNES .. "/fortunes") then return end
  local english = data.fortunes(FORTUNES .. "/fortunes")
  check.is_true(english:cardinality() > 100, "fortunes: " .. english:cardinality())
  for _, sub in ipairs {"de", "it", "es"} do
    if exists(FORTUNES .. "/" .. sub) then
      local n = data.fortunes(FORTUNES .. "/" .. sub):cardinality()
      check.is_true(n > 100, sub .. ": " .. n)
    end
  end
  if exists(FORTUNES .. "/brasil") then
    check.is_true(data.fortunes(FORTUNES .. "/brasil"):cardinality() > 100)
  end
  local vocab = data.Vocabulary.build(english, {level = "char"})
  check.eq(vocab:decode(vocab:encode("Hello, world")), "Hello, world")
end

---------------------------------------------------------------- vocabulary

tests["a character vocabulary encodes and decodes"] = function()
  local vocab = data.Vocabulary.build({"abba", "cab", "é!"})
  -- a:3, b:3, c:1, é:1, !:1 -> ids by count, ties in byte order.
  check.eq(vocab:size(), 7)
  check.eq(#vocab, 7)
  check.eq({vocab:id("a"), vocab:id("b"), vocab:id("!"), vocab:id("c"), vocab:id("é")}, {2, 3, 4, 5, 6})
  check.eq(vocab:id("z"), data.Vocabulary.UNKNOWN)
  local ids = vocab:encode("cabz")
  check.eq(ids.dtype, "i32")
  check.eq(ids:totable(), {5, 2, 3, 1})
  check.eq(vocab:decode(ids), "cab<unk>")
  check.eq(vocab:decode({0, 2, 0, 6}), "aé", "padding ids are skipped")
  check.eq(vocab:encode("").shape, {0})
  check.eq(vocab:encode("abcab", {max_len = 3}):totable(), {2, 3, 5})
  check.eq(vocab:token(0), "<pad>")
  check.eq(vocab:token(1), "<unk>")
  check.eq(tostring(vocab), "Vocabulary(char, 7 ids)")
end

tests["a word vocabulary with min_count, max_size and lower"] = function()
  local texts = {"The cat sat", "the dog sat", "a cat ran"}
  local vocab = data.Vocabulary.build(texts, {level = "word", min_count = 2, lower = true})
  check.eq(vocab:size(), 5, "cat, sat, the")
  check.eq(vocab:encode("The cat flew"):totable(), {vocab:id("the"), vocab:id("cat"), 1})
  check.eq(vocab:decode(vocab:encode("sat the cat")), "sat the cat")
  local small = data.Vocabulary.build(texts, {level = "word", max_size = 3})
  check.eq(small:size(), 3)
  check.eq(small:token(2), "cat", "the most frequent word first")
  local same = data.Vocabulary.build(texts, {level = "word", max_size = 3})
  check.eq(same:token(2), small:token(2))
  local explicit = data.Vocabulary({"x", "y"}, {level = "word"})
  check.eq(explicit:encode("y x q"):totable(), {3, 2, 1})
  -- the documented colon form (it read the class as the texts), and a message that says the bound
  check.eq(data.Vocabulary:build(texts, {level = "word", max_size = 3}):token(2), "cat")
  check.raises(function() data.Vocabulary.build(texts, {max_size = 1}) end,
    "Vocabulary.build: max_size must be an integer >= 2, got 1")
end

tests["Vocabulary.build from a data set of strings"] = function()
  local dir = util.temp_dir()
  local lines = data.text_lines(util.write(dir .. "/t.txt", "ab\nba\nc\n"))
  local vocab = data.Vocabulary.build(lines)
  check.eq(vocab:size(), 5)
  check.raises(function() data.Vocabulary.build(data.range(3)) end,
    "Vocabulary.build: the data set's elements must be strings, got a tensor i32[]")
  util.remove(dir)
end

tests["Vocabulary errors echo the bad value"] = function()
  check.raises(function() data.Vocabulary.build({"a"}, {level = "byte"}) end,
    'Vocabulary.build: level must be "char" or "word", got "byte"')
  check.raises(function() data.Vocabulary.build({"a"}, {min_count = 0}) end,
    "Vocabulary.build: min_count must be a positive integer, got 0")
  check.raises(function() data.Vocabulary.build({"a"}, {max_size = 1}) end, "max_size must be an integer")
  check.raises(function() data.Vocabulary.build({"a", 5}) end, "Vocabulary.build: text 2 is 5")
  check.raises(function() data.Vocabulary.build("abc") end,
    'Vocabulary.build: expected a list of strings or a data set of strings, got "abc"')
  local vocab = data.Vocabulary.build({"ab"})
  check.raises(function() vocab:encode(5) end, "Vocabulary: expected a string, got 5")
  check.raises(function() vocab:decode({9}) end, "Vocabulary: id 9 is out of range (0 .. 3)")
  check.raises(function() vocab:decode(tpu.zeros({2, 2}, {dtype = "i32"})) end, "decode: expected a 1-D tensor of ids, got a tensor i32[2,2]")
  check.raises(function() data.Vocabulary({"a", "a"}) end, 'Vocabulary: token 2 must be a new string, got "a"')
end

---------------------------------------------------------------- host maps

tests["map with {host = true} turns strings into tensors"] = function()
  local dir = util.temp_dir()
  local lines = data.text_lines(util.write(dir .. "/t.txt", "abc\na\nbb\n"))
  local vocab = data.Vocabulary.build(lines)
  local ids = lines:map(function(s) return vocab:encode(s), #s end, {host = true})
  check.eq(ids:cardinality(), 3)
  local x, y = ids:element_spec()
  check.eq(tostring(x), "i32[?]")
  check.eq(tostring(y), "i32[]")
  local batches = collect(ids:padded_batch(3, {pad_to_multiple_of = 4}))
  check.eq(batches[1][2], {3, 1, 2})
  check.eq(batches[1][1][2], {vocab:id("a"), 0, 0, 0})
  -- A host map may also keep strings, return booleans and nested tables.
  local tagged = lines:map(function(s) return {text = s:upper(), long = #s > 1} end, {host = true})
  local first = tagged:iter()()
  check.eq(first.text, "ABC")
  check.eq(first.long:item(), true)
  util.remove(dir)
end

tests["host map and traced map errors"] = function()
  local dir = util.temp_dir()
  local lines = data.text_lines(util.write(dir .. "/t.txt", "abc\n"))
  local msg = check.raises(function() collect(lines:map(function(s) return s end)) end,
    "map: the elements hold strings, which cannot be traced; use ds:map(fn, {host = true}) to run a plain Lua function on them")
  check.is_true(util.located(msg), msg)
  check.raises(function() lines:map(function(s) return s end):element_spec() end, "map: the elements hold strings")
  check.raises(function() collect(lines:map(function() end, {host = true})) end, "map: the function returned nothing")
  check.raises(function() collect(lines:map(function() return print end, {host = true})) end,
    "map: result [1] is a function; elements hold tensors, numbers, booleans and strings")
  check.raises(function() lines:map(function() end, {host = 1}) end, "map: host must be true or false, got 1")
  check.raises(function() lines:map(function() end, {jit = false}) end, 'map: unknown option "jit" (expected host, seed)')
  util.remove(dir)
end

return tests
