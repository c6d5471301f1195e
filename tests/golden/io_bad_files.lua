-- A table of bad safetensors files: each load is a one-line error naming the file, the tensor
-- and what is wrong; never a crash, never a partial result.
local tpu = require "tpu"
local ckpt = require "tpu.checkpoint"
local files = dofile("../lua/files.lua")  -- removes the directory at exit, also after an error
local dir = files.tmpdir()
os.execute("mkdir -p " .. dir)

local function file(header, data)
  return string.pack("<I8", #header) .. header .. (data or "")
end
local function entry(name, dtype, shape, b, e)
  return string.format('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}', name, dtype, shape, b, e)
end

ckpt.save_tensors(dir .. "/good.safetensors", {w = tpu.ones {4, 4}, b = tpu.zeros {4}})
local f = assert(io.open(dir .. "/good.safetensors", "rb"))
local good = f:read("a")
f:close()

local cases = {
  {"truncated data", good:sub(1, #good - 10)},
  {"truncated header", good:sub(1, 40)},
  {"too short", "abc"},
  {"empty", ""},
  {"huge header length", string.pack("<I8", 1 << 40) .. "{}"},
  {"not JSON", file("{\"w\": nonsense}")},
  {"JSON list", file("[]")},
  {"duplicate name", file("{" .. entry("w", "F32", "1", 0, 4) .. "," .. entry("w", "F32", "1", 0, 4) .. "}", "abcd")},
  {"wrong dtype", file("{" .. entry("w", "F64", "2", 0, 16) .. "}", string.rep("\0", 16))},
  {"unknown dtype", file("{" .. entry("w", "Q8", "2", 0, 2) .. "}", "ab")},
  {"negative size", file("{" .. entry("w", "F32", "-1", 0, 4) .. "}", "abcd")},
  {"shape and offsets disagree", file("{" .. entry("w", "F32", "3,3", 0, 32) .. "}", string.rep("\0", 32))},
  {"offsets past the end", file("{" .. entry("w", "U8", "8", 0, 8) .. "}", "abcd")},
  {"overlapping tensors", file("{" .. entry("a", "U8", "4", 0, 4) .. "," .. entry("b", "U8", "2", 2, 4) .. "}", "abcd")},
  {"gap between tensors", file("{" .. entry("a", "U8", "2", 0, 2) .. "," .. entry("b", "U8", "1", 3, 4) .. "}", "abcd")},
  {"trailing bytes", file("{" .. entry("a", "U8", "2", 0, 2) .. "}", "abcd")},
  {"bad boolean", file("{" .. entry("m", "BOOL", "2", 0, 2) .. "}", "\1\7")},
  {"metadata not strings", file('{"__metadata__":{"step":12}}')},
}
for _, case in ipairs(cases) do
  local out = assert(io.open(dir .. "/bad.safetensors", "wb"))
  out:write(case[2])
  out:close()
  local ok, err = pcall(ckpt.load_tensors, dir .. "/bad.safetensors")
  print(string.format("%-27s %s", case[1] .. ":", ok and "loaded!" or err:gsub(dir, "<dir>")))
end
local ok, err = pcall(ckpt.load_tensors, dir)
print(string.format("%-27s %s", "a directory:", ok and "loaded!" or err:gsub(dir, "<dir>")))
ok, err = pcall(ckpt.load_tensors, dir .. "/missing.safetensors")
print(string.format("%-27s %s", "missing file:", ok and "loaded!" or err:gsub(dir, "<dir>")))
print("the good file still loads:", ckpt.load_tensors(dir .. "/good.safetensors").w.shape[1] == 4)
os.execute("rm -rf " .. dir)
