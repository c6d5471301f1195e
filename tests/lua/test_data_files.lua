-- tpu.data sources read from files: csv and npy (idx is in test_data.lua).
local tpu = require "tpu"
local data = tpu.data
local check = require "check"
local util = require "data_util"
local collect = util.collect

local tests = {}

local IRIS = [[
sepal_length,sepal_width,petal_length,petal_width,species
5.1,3.5,1.4,0.2,setosa
7.0,3.2,4.7,1.4,versicolor
6.3,3.3,6.0,2.5,virginica
4.9,3.0,1.4,0.2,setosa
]]

tests["csv reads features and a label column"] = function()
  local dir = util.temp_dir()
  local path = util.write(dir .. "/iris.csv", IRIS)
  local ds = data.csv(path, {label = "species", label_classes = {"setosa", "versicolor", "virginica"}})
  check.eq(ds:cardinality(), 4)
  local x, y = ds:element_spec()
  check.eq(tostring(x), "f32[4]")
  check.eq(tostring(y), "i32[]")
  check.eq(ds.feature_names, {"sepal_length", "sepal_width", "petal_length", "petal_width"})
  local xb, yb = ds:batch(4):iter()()
  check.near(xb:totable()[2], {7.0, 3.2, 4.7, 1.4}, 1e-6)
  check.eq(yb:totable(), {0, 1, 2, 0})
  -- Columns by name or number, in the order given; no label: one component.
  local two = data.csv(path, {columns = {"petal_width", 1}})
  check.eq(two.feature_names, {"petal_width", "sepal_length"})
  check.near(collect(two)[1], {0.2, 5.1}, 1e-6)
  local a, b = two:element_spec()
  check.eq(tostring(a), "f32[2]")
  check.eq(b, nil)
  util.remove(dir)
end

tests["csv numeric labels, i32 features, no header, delimiters and quoting"] = function()
  local dir = util.temp_dir()
  local p1 = util.write(dir .. "/a.csv", "x;y;label\n1;2;0\n3;-4;1\n")
  local ds = data.csv(p1, {delimiter = ";", label = 3, dtype = "i32"})
  check.eq(collect(ds), {{{1, 2}, 0}, {{3, -4}, 1}})
  check.eq(tostring((ds:element_spec())), "i32[2]")
  local p2 = util.write(dir .. "/b.csv", "1.5,2\r\n\r\n3,4.25\r\n")
  check.eq(collect(data.csv(p2, {header = false, label = 2, label_dtype = "f32"})), {{{1.5}, 2}, {{3}, 4.25}})
  local p3 = util.write(dir .. "/c.csv", '"a","b, quoted"\n" 1 ","2"\n')
  local q = data.csv(p3)
  check.eq(q.feature_names, {"a", "b, quoted"})
  check.eq(collect(q), {{1, 2}})
  local p4 = util.write(dir .. "/d.csv", "a,b\n")
  check.eq(data.csv(p4):cardinality(), 0)
  util.remove(dir)
end

tests["malformed csv rows name file:line:column"] = function()
  local dir = util.temp_dir()
  local function fails(text, expected, opts)
    local path = util.write(dir .. "/bad.csv", text)
    local msg = check.raises(function() data.csv(path, opts) end, path .. ":" .. expected)
    check.is_true(util.located(msg), msg)
  end
  fails("a,b\n1,2\n3\n", '3:2: expected 2 fields (as in the header), found 1')
  fails("a,b\n1,2,3\n", '2:5: expected 2 fields (as in the header), found 3')
  fails("a,b\n1,x2\n", '2:3: column 2 ("b"): expected a number, got "x2"')
  fails("a,b\n1,\n", '2:3: column 2 ("b"): empty field (expected a number)')
  fails("a,b\n1,2.5\n", '2:3: column 2 ("b"): expected an integer, got "2.5"', {dtype = "i32"})
  fails("a,b\n1,99999999999\n", '2:3: column 2 ("b"): "99999999999" is out of the i32 range', {dtype = "i32"})
  fails("a,b\n1,nan\n", '2:3: column 2 ("b"): expected a number, got "nan"')
  fails('a,b\n1,"2\n', "2:3: unterminated quoted field: the quote opened here is never closed")
  fails('a,b\n1,"2"x\n', '2:6: unexpected character "x" after the closing quote of a quoted field')
  fails('a,b\n1,2"\n', '2:4: a quote inside an unquoted field')
  fails("a,b\n1,\0\n", "2:3: a NUL byte: this is binary data, not CSV text")
  fails("a,l\n1,dog\n", '2:3: column 2 ("l"): "dog" is not one of the label_classes ("cat", "cow")',
    {label = "l", label_classes = {"cat", "cow"}})
  fails("é,b\n1,\"x\"\n", '2:3: column 2 ("b"): expected a number, got "x"')
  util.remove(dir)
end

tests["csv errors about the file and the options"] = function()
  local dir = util.temp_dir()
  local path = util.write(dir .. "/iris.csv", IRIS)
  check.raises(function() data.csv(path, {label = "kind"}) end,
    path .. ': no column named "kind" in the header (columns: "sepal_length", "sepal_width", "petal_length", "petal_width", "species")')
  check.raises(function() data.csv(path, {columns = {9}}) end, path .. ": there is no column 9; the file has 5 columns (numbered from 1)")
  check.raises(function() data.csv(path, {label = 5, columns = {5}}) end,
    path .. ': column 5 ("species") is both a feature and the label')
  check.raises(function() data.csv(path, {header = false, label = "species"}) end,
    path .. ': column "species" is chosen by name, but the file has no header row')
  check.raises(function() data.csv(path) end, path .. ':2:17: column 5 ("species"): expected a number, got "setosa"')
  check.raises(function() data.csv(dir .. "/none.csv") end, dir .. "/none.csv: file not found")
  -- gzip-compressed, like IDX files: the same rows
  assert(os.execute(string.format("gzip -c %q > %q", path, path .. ".gz")))
  local opts = {label = "species", label_classes = {"setosa", "versicolor", "virginica"}}
  local plain, packed = data.csv(path, opts), data.csv(path .. ".gz", opts)
  check.eq(packed:cardinality(), plain:cardinality())
  local px, py = plain:batch(1000):iter()()
  local gx, gy = packed:batch(1000):iter()()
  check.eq({gx:totable(), gy:totable()}, {px:totable(), py:totable()})
  local f = assert(io.open(path .. ".gz", "rb"))
  local bytes = f:read("a")
  f:close()
  util.write(dir .. "/cut.csv.gz", bytes:sub(1, #bytes // 2))
  check.raises(function() data.csv(dir .. "/cut.csv.gz") end,
    "cut.csv.gz: truncated gzip file: the compressed stream ends early")
  check.raises(function() data.csv(util.write(dir .. "/e.csv", "")) end, "e.csv: empty CSV file (no header row)")
  check.raises(function() data.csv(util.write(dir .. "/dup.csv", "a,a\n1,2\n"), {columns = {"a"}}) end,
    'dup.csv: the header names column "a" twice (columns 1 and 2)')
  check.raises(function() data.csv(path, {labels = "x"}) end, 'csv: unknown option "labels"')
  check.raises(function() data.csv(path, {dtype = "f64"}) end, 'csv: dtype must be "f32" or "i32", got "f64"')
  check.raises(function() data.csv(path, {columns = {0}}) end, "csv: columns[1] must be a column name or a 1-based column number, got 0")
  check.raises(function() data.csv(path, {delimiter = ";;"}) end, 'csv: delimiter must be one character, got ";;"')
  check.raises(function() data.csv(path, {label_classes = "setosa"}) end, 'csv: label_classes must be a list of label names, got "setosa"')
  check.raises(function() data.csv(42) end, "csv: the file name must be a string, got 42")
  util.remove(dir)
end

tests["npy reads arrays as from_tensors"] = function()
  local dir = util.temp_dir()
  local x = util.write_npy(dir .. "/x.npy", "<f8", "(3, 2)", string.pack("<dddddd", 1, 2, 3, 4, 5, 6.5))
  local y = util.write_npy(dir .. "/y.npy", "|u1", "(3,)", "\7\8\9")
  local ds = data.npy(x, y)
  check.eq(ds:cardinality(), 3)
  local xs, ys = ds:element_spec()
  check.eq(tostring(xs), "f32[2]")
  check.eq(tostring(ys), "u8[]")
  check.eq(collect(ds)[3], {{5, 6.5}, 9})
  check.eq(collect(data.npy(util.write_npy(dir .. "/b.npy", "|b1", "(2,)", "\1\0"))), {true, false})
  check.eq(collect(data.npy(util.write_npy(dir .. "/i.npy", ">i4", "(2,)", string.pack(">i4i4", -3, 70000)))), {-3, 70000})
  local v3 = util.write_npy(dir .. "/v3.npy", "<i8", "(2,)", string.pack("<i8i8", 5, -6), {version = 3})
  check.eq(collect(data.npy(v3)), {5, -6})
  local short = util.write_npy(dir .. "/s.npy", "|u1", "(4,)", "\1\2\3\4")
  check.raises(function() data.npy(x, short) end, "npy: " .. x .. " holds 3 examples but " .. short .. " holds 4")
  check.raises(function() data.npy(util.write_npy(dir .. "/0.npy", "<f4", "()", string.pack("<f", 1))) end,
    "npy: [1] is a scalar")
  check.raises(function() data.npy(42) end, "npy: expected a file name, got 42")
  util.remove(dir)
end

tests["corrupt npy files are errors that name the file"] = function()
  local dir = util.temp_dir()
  local function fails(path, expected)
    local msg = check.raises(function() data.npy(path) end, path .. ": " .. expected)
    check.is_true(util.located(msg), msg)
  end
  fails(util.write(dir .. "/magic.npy", "PK\3\4 not an array file"), "not a .npy file: it does not start with the magic bytes \\x93NUMPY")
  fails(util.write_npy(dir .. "/f.npy", "<f4", "(2, 2)", string.rep("\0", 16), {fortran = true}),
    "Fortran-ordered (column-major) arrays are not supported")
  fails(util.write_npy(dir .. "/t.npy", "<f4", "(2, 2)", string.rep("\0", 12)),
    "truncated .npy file: expected 16 bytes of data for '<f4' (2, 2), found 12")
  fails(util.write_npy(dir .. "/u.npy", "<U8", "(2,)", ""), "unsupported .npy dtype '<U8'")
  fails(util.write(dir .. "/h.npy", "\x93NUMPY\1\0\200\0{'descr'"), "bad .npy header length 200: the file holds only 8 more bytes")
  util.remove(dir)
end

return tests
