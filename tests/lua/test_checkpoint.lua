-- Tests of tpu.save/load, model:save/load and training checkpoints (tpu.checkpoint): exact
-- round trips, checked loads, bitwise-identical resumption in a fresh process, kill -9 while
-- writing, and interchange with an independent reader and writer (Python json + numpy).
local tpu = require "tpu"
local check = require "check"
local ckpt = require "tpu.checkpoint"
require "tpu.nn.persistence"  -- model:save/load (tpu.nn loads it too)
local nn, optim = tpu.nn, tpu.optim

local T = {}

---------------------------------------------------------------- helpers

local files = require "files"
local sh, tmpdir, rmdir, write, read = files.sh, files.tmpdir, files.rmdir, files.write, files.must_read

-- The running tputrain binary (the shell's parent is this process).
local function exe()
  local p = io.popen("readlink /proc/$PPID/exe")
  local path = p:read("l")
  p:close()
  return path
end

-- The first line a shell command prints.
local function command_line(cmd)
  local p = io.popen(cmd)
  local line = p:read("l")
  p:close()
  return line
end

local function bits_equal(a, b)
  return a.dtype == b.dtype and check.show(a.shape) == check.show(b.shape)
    and check.show(a:totable()) == check.show(b:totable())
end

local function copy(t) return tpu.tensor(t:totable(), {dtype = t.dtype}) end

---------------------------------------------------------------- tpu.save / tpu.load

function T.tensors_round_trip_every_dtype()
  local dir = tmpdir()
  local t = {
    encoder = {w = tpu.tensor {{1.5, -2}, {0.1, 3e-8}}, b = tpu.tensor({1, 2, 3}, {dtype = "bf16"})},
    layers = {tpu.tensor({7, -8}, {dtype = "i32"}), tpu.tensor({0, 255}, {dtype = "u8"})},
    mask = tpu.tensor({1, 0, 1}):gt(0),
    scalar = tpu.tensor(4.25),
    empty = tpu.zeros {0, 3},
  }
  ckpt.save_tensors(dir .. "/t.safetensors", t, {note = "hello"})
  local flat, meta = ckpt.load_tensors(dir .. "/t.safetensors")
  check.eq(meta.note, "hello")
  check.eq(meta["tputrain.format"], "tensors/1")
  local names = {}
  for k in pairs(flat) do names[#names + 1] = k end
  table.sort(names)
  check.eq(names, {"empty", "encoder.b", "encoder.w", "layers.1", "layers.2", "mask", "scalar"})
  check.is_true(bits_equal(flat["encoder.w"], t.encoder.w))
  check.is_true(bits_equal(flat["encoder.b"], t.encoder.b))
  check.is_true(bits_equal(flat["layers.1"], t.layers[1]))
  check.is_true(bits_equal(flat.mask, t.mask))
  check.eq(flat.empty.shape, {0, 3})
  local nested = ckpt.load_tensors(dir .. "/t.safetensors", {nested = true})
  check.is_true(bits_equal(nested.layers[2], t.layers[2]), "integer keys come back as integers")
  check.is_true(bits_equal(nested.encoder.w, t.encoder.w))
  check.eq(nested.scalar:item(), 4.25)
  rmdir(dir)
end

function T.tpu_save_and_load_and_the_lazy_modules()
  local dir = tmpdir()
  check.is_true(tpu.checkpoint == ckpt, "tpu.checkpoint loads on first use")
  check.is_true(tpu.callbacks == require "tpu.callbacks")
  tpu.save(dir .. "/t.safetensors", {a = {b = tpu.tensor {1, 2}}}, {note = "x"})
  local flat, meta = tpu.load(dir .. "/t.safetensors")
  check.eq(flat["a.b"]:totable(), {1, 2})
  check.eq(meta.note, "x")
  check.eq(tpu.load(dir .. "/t.safetensors", {nested = true}).a.b:totable(), {1, 2})
  check.raises(function() tpu.load(dir .. "/t.safetensors", {nest = true}) end, "tpu.load: unknown option 'nest'")
  check.eq(type(nn.Dense.save), "function", "model:save comes with tpu.nn")
  check.eq(type(nn.Sequential.load), "function")
  rmdir(dir)
end

function T.save_rejects_what_is_not_a_table_of_tensors()
  check.raises(function() ckpt.save_tensors("/tmp/x.safetensors", {a = 1}) end,
    "tpu.save: 'a' is a number, not a tensor")
  local loop = {}
  loop.self = loop
  check.raises(function() ckpt.save_tensors("/tmp/x.safetensors", loop) end, "contains itself")
  check.raises(function() ckpt.save_tensors("/tmp/x.safetensors", {["a.b"] = tpu.zeros {1}, a = {b = tpu.zeros {1}}}) end,
    "two tensors would be named 'a.b'")
  check.raises(function() ckpt.save_tensors("/tmp/x.safetensors", tpu.zeros {1}) end, "wrap it")
  check.raises(function() ckpt.save_tensors("/no/such/dir/x.safetensors", {a = tpu.zeros {1}}) end,
    "cannot write /no/such/dir/x.safetensors: the directory /no/such/dir does not exist")
  check.raises(function() ckpt.load_tensors("/no/such/file.safetensors") end, "/no/such/file.safetensors: file not found")
end

function T.nested_load_reports_conflicting_names()
  local dir = tmpdir()
  ckpt.save_tensors(dir .. "/c.safetensors", {["a"] = tpu.zeros {1}, ["a.b"] = tpu.zeros {1}})
  check.eq(#ckpt.load_tensors(dir .. "/c.safetensors")["a.b"].shape, 1)
  check.raises(function() ckpt.load_tensors(dir .. "/c.safetensors", {nested = true}) end,
    "'a' is both a value and a prefix of other names")
  rmdir(dir)
end

---------------------------------------------------------------- model:save / model:load

local function mlp(units)
  return nn.Sequential {nn.Flatten(), nn.Dense(units or 8, {activation = "relu"}), nn.BatchNorm(), nn.Dense(3)}
end

function T.model_weights_round_trip_into_a_fresh_model()
  local dir = tmpdir()
  nn.set_seed(1)
  local x = tpu.random.normal(tpu.random.key(1), {4, 2, 3})
  local a = mlp()
  a(x)
  a:save(dir .. "/m.safetensors")
  local names = {}
  for _, w in ipairs(a:named_parameters()) do names[#names + 1] = w.name end
  check.eq(names, {"2.kernel", "2.bias", "3.gamma", "3.beta", "3.moving_mean", "3.moving_variance",
                   "4.kernel", "4.bias"})
  nn.set_seed(2)
  local b = mlp()  -- other layer names (dense_3, ...), other initial weights
  b(x)
  check.is_true(not bits_equal(a:parameters()[1], b:parameters()[1]))
  check.eq(b:load(dir .. "/m.safetensors"), b)
  for i, p in ipairs(a:parameters()) do check.is_true(bits_equal(p, b:parameters()[i]), "weight " .. i) end
  check.is_true(bits_equal(a(x), b(x)))
  rmdir(dir)
end

function T.model_load_reports_every_mismatch()
  local dir = tmpdir()
  local x = tpu.zeros {2, 6}
  local a = mlp(8)
  a(x)
  a:save(dir .. "/m.safetensors")
  local b = mlp(5)
  b(x)
  local err = check.raises(function() b:load(dir .. "/m.safetensors") end, "model:load: " .. dir .. "/m.safetensors does not match Sequential")
  check.is_true(err:find("weight '2.kernel' (layer dense_", 1, true) ~= nil, err)
  check.is_true(err:find("Dense) is f32[6,5] in the model but f32[6,8] in the file", 1, true) ~= nil, err)
  check.is_true(err:find("weight '3.gamma' (layer batch_norm_", 1, true) ~= nil, err)
  local c = nn.Sequential {nn.Flatten(), nn.Dense(8, {dtype = "bf16"}), nn.BatchNorm(), nn.Dense(3)}
  c(x)
  check.raises(function() c:load(dir .. "/m.safetensors") end, "is bf16[6,8] in the model but f32[6,8] in the file")
  local d = nn.Sequential {nn.Flatten(), nn.Dense(8), nn.BatchNorm()}
  d(x)
  check.raises(function() d:load(dir .. "/m.safetensors") end, "unexpected weight '4.bias' (f32[3]) that the model does not have")
  local e = nn.Sequential {nn.Flatten(), nn.Dense(8), nn.BatchNorm(), nn.Dense(3), nn.Dense(2)}
  e(x)
  check.raises(function() e:load(dir .. "/m.safetensors") end, "missing weight '5.kernel' (layer dense_")
  check.raises(function() mlp():load(dir .. "/m.safetensors") end, "has no weights yet")
  check.raises(function() mlp():save(dir .. "/n.safetensors") end, "has no weights yet")
  -- a failed load changes nothing
  local before = copy(b:parameters()[1])
  pcall(b.load, b, dir .. "/m.safetensors")
  check.is_true(bits_equal(before, b:parameters()[1]))
  rmdir(dir)
end

---------------------------------------------------------------- checkpoints

function T.checkpoint_round_trips_every_kind_of_value()
  local dir = tmpdir()
  local model = mlp()
  model(tpu.zeros {2, 6})
  local opt = optim.Adam {lr = 1e-3}
  local state = {
    model = model,
    optimizer_state = opt:init(model:parameters()),
    step = 1234, epoch = 3, lr = 0.1, tiny = 5e-324, big = -1.7976931348623157e308,
    inf = math.huge, ninf = -math.huge, name = "run a.b: 1", done = false, yes = true,
    rng = {dropout_key = tpu.random.key(42):split(3)[2]},
    data_position = {pass = 3, batch = 0},
    history = {values = {loss = {0.5, 0.25}}, keys = {"loss"}, epochs = {1, 2}},
    empty = {},
  }
  ckpt.save(dir .. "/c.safetensors", state)
  local s = ckpt.load(dir .. "/c.safetensors")
  for _, k in ipairs {"step", "epoch", "lr", "tiny", "big", "inf", "ninf", "name", "done", "yes"} do
    check.eq(s[k], state[k], k)
    check.eq(math.type(s[k]), math.type(state[k]), k)
  end
  check.eq(s.data_position, state.data_position)
  check.eq(s.history, state.history)
  check.eq(s.empty, {})
  check.is_true(tpu.random.is_key(s.rng.dropout_key))
  check.eq(s.rng.dropout_key:value(), state.rng.dropout_key:value())
  check.is_true(bits_equal(s.optimizer_state.step, state.optimizer_state.step))
  check.eq(#s.optimizer_state.m, #model:parameters())
  check.is_true(bits_equal(s.optimizer_state.v[3], state.optimizer_state.v[3]))
  check.is_true(bits_equal(s.model["2.kernel"], model:parameters()[1]), "models come back as name -> tensor")
  -- loaded into a model, with the same checks as model:load
  local fresh = mlp()
  fresh(tpu.zeros {2, 6})
  local s2 = ckpt.load(dir .. "/c.safetensors", {model = fresh})
  check.eq(s2.model, fresh)
  check.is_true(bits_equal(fresh:parameters()[7], model:parameters()[7]))
  local other = mlp(4)
  other(tpu.zeros {2, 6})
  check.raises(function() ckpt.load(dir .. "/c.safetensors", {model = other}) end, "weight '2.kernel'")
  -- NaN survives as NaN
  ckpt.save(dir .. "/n.safetensors", {x = 0 / 0})
  local nan = ckpt.load(dir .. "/n.safetensors").x
  check.is_true(nan ~= nan)
  rmdir(dir)
end

function T.checkpoint_strings_that_are_not_utf8_come_back_exactly()
  local dir = tmpdir()
  local state = {latin1 = "caf\xe9", cut = "\xe2\x82", surrogate = "\xed\xa0\x80", overlong = "\xc0\xaf",
    nul = "a\0b", text = "caf\xc3\xa9 \xf0\x9f\x99\x82", empty = "", bytes = ""}
  for i = 0, 255 do state.bytes = state.bytes .. string.char(i) end
  ckpt.save(dir .. "/c.safetensors", state)
  check.eq(ckpt.load(dir .. "/c.safetensors"), state)
  -- UTF-8 text is stored as it is (other readers see it), the rest in hexadecimal
  local _, meta = ckpt.load_tensors(dir .. "/c.safetensors")
  check.eq(meta["value:text"], "s:caf\xc3\xa9 \xf0\x9f\x99\x82")
  check.eq(meta["value:latin1"], "x:636166e9")
  -- a corrupt hexadecimal value is an error naming it
  ckpt.save_tensors(dir .. "/bad.safetensors", {}, {["tputrain.format"] = "checkpoint/1", ["value:a"] = "x:6g"})
  check.raises(function() ckpt.load(dir .. "/bad.safetensors") end, "bad value \"x:6g\" for 'a'")
  rmdir(dir)
end

function T.checkpoint_errors_say_what_to_use_instead()
  local dir = tmpdir()
  check.raises(function() ckpt.save(dir .. "/c.safetensors", {f = print}) end, "'f' is a function")
  check.raises(function() ckpt.save(dir .. "/c.safetensors", {["a.b"] = 1}) end, "key 'a.b' at '' contains '.'")
  check.raises(function() ckpt.save(dir .. "/c.safetensors", {["1"] = 1}) end, "is a number written as a string")
  check.raises(function() ckpt.save(dir .. "/c.safetensors", tpu.zeros {1}) end, "the state must be a table")
  ckpt.save_tensors(dir .. "/t.safetensors", {a = tpu.zeros {1}})
  check.raises(function() ckpt.load(dir .. "/t.safetensors") end, "is not a training checkpoint (it holds plain tensors); read it with tpu.load(path)")
  local model = mlp()
  model(tpu.zeros {1, 6})
  model:save(dir .. "/m.safetensors")
  check.raises(function() ckpt.load(dir .. "/m.safetensors") end, "(it holds model weights); read it with model:load(path)")
  tpu.core.save_safetensors(dir .. "/bad.safetensors", {}, {["tputrain.format"] = "checkpoint/1", ["value:x"] = "q:1"})
  check.raises(function() ckpt.load(dir .. "/bad.safetensors") end, "corrupt checkpoint: bad value \"q:1\" for 'x'")
  rmdir(dir)
end

---------------------------------------------------------------- resuming bitwise

-- The same training in every process: a model with dropout (per-step random keys), a data
-- set that reshuffles each pass, Adam.
local TRAIN = [[
local tpu = require "tpu"
local ckpt = require "tpu.checkpoint"
require "tpu.nn.persistence"
local nn, data, optim = tpu.nn, tpu.data, tpu.optim
local mode, dir = arg[1], arg[2]
nn.set_seed(7)
local x = tpu.random.normal(tpu.random.key(3), {96, 6})
local y = (x:sum(2) * 3):cast("i32") % 4
local ds = data.from_tensors {x, y}:shuffle(96, {seed = 5}):batch(16, {drop_remainder = true})
local model = nn.Sequential {nn.Dense(16, {activation = "relu"}), nn.Dropout(0.3), nn.BatchNorm(), nn.Dense(4)}
model(x:slice {{1, 16}})
model:compile {optimizer = optim.Adam {lr = 0.01}, loss = "sparse_categorical_crossentropy"}
if mode == "whole" then
  model:fit(ds, {epochs = 3, verbose = 0})
  model:save(dir .. "/whole.safetensors")
elseif mode == "first" then
  model:fit(ds, {epochs = 2, verbose = 0})
  ckpt.save(dir .. "/ckpt.safetensors", ckpt.training_state(model, {epoch = 2, data_position = ckpt.data_position(ds, 0)}))
else
  local state = ckpt.restore_training(model, ckpt.load(dir .. "/ckpt.safetensors", {model = model}))
  ckpt.restore_data_position(ds, state.data_position)
  assert(state.epoch == 2)
  model:fit(ds, {epochs = 1, verbose = 0})
  model:save(dir .. "/resumed.safetensors")
end
]]

function T.resume_in_a_fresh_process_is_bitwise_identical()
  local dir = tmpdir()
  write(dir .. "/train.lua", TRAIN)
  for _, mode in ipairs {"whole", "first", "rest"} do
    local ok = sh(string.format("%q %q %s %q", exe(), dir .. "/train.lua", mode, dir))
    check.is_true(ok, "training step " .. mode)
  end
  local whole, resumed = read(dir .. "/whole.safetensors"), read(dir .. "/resumed.safetensors")
  check.is_true(#whole > 1000)
  check.is_true(whole == resumed, "the resumed run's weights differ from the uninterrupted run's")
  -- and resuming without the optimizer state or the data position would not match
  local s = ckpt.load(dir .. "/ckpt.safetensors")
  check.eq(s.step, 12)
  check.eq(s.data_position, {pass = 2, batch = 0})
  rmdir(dir)
end

---------------------------------------------------------------- kill -9 while writing

-- A writer that saves checkpoints in a loop: step i holds w = i everywhere (8 MiB).
local WRITER = [[
local tpu = require "tpu"
local ckpt = require "tpu.checkpoint"
local path, first = arg[1], tonumber(arg[2])
for i = first, first + 1000 do
  ckpt.save(path, {w = tpu.full({2048, 1024}, i), step = i})
  if i == first then io.open(path .. ".started", "w"):close() end  -- the test kills from now on
end
]]

-- Waits (up to 30 s, however loaded the machine) until the writer has saved once.
local function wait_for_start(path)
  for _ = 1, 1500 do
    local f = io.open(path .. ".started")
    if f then f:close(); os.remove(path .. ".started"); return end
    sh("sleep 0.02")
  end
  error("the checkpoint writer did not start within 30 s")
end

-- Starts a writer in the background; returns its pid and the shell that waits for it (closing
-- that pipe reaps the killed writer, so no zombie is left).
local function run_writer(dir, first)
  local shell = io.popen(string.format("%q %q %q %d >/dev/null 2>&1 & echo $!; wait", exe(),
    dir .. "/writer.lua", dir .. "/ckpt.safetensors", first))
  return shell:read("n"), shell
end

function T.kill_9_while_writing_leaves_a_loadable_checkpoint()
  local dir = tmpdir()
  write(dir .. "/writer.lua", WRITER)
  ckpt.save(dir .. "/ckpt.safetensors", {w = tpu.full({2048, 1024}, 0), step = 0})
  math.randomseed(11)
  local steps_seen, rounds = {}, 25
  for round = 1, rounds do
    local pid, shell = run_writer(dir, round * 10000)
    wait_for_start(dir .. "/ckpt.safetensors")
    sh(string.format("sleep %.3f", math.random() * 0.2))  -- at a random point of a later save
    sh("kill -9 " .. pid)
    shell:close()
    local s = ckpt.load(dir .. "/ckpt.safetensors")
    check.eq(s.w.shape, {2048, 1024})
    check.eq(s.w:min():item(), s.step, "round " .. round)
    check.eq(s.w:max():item(), s.step, "round " .. round)
    steps_seen[s.step] = true
  end
  local distinct = 0
  for _ in pairs(steps_seen) do distinct = distinct + 1 end
  check.is_true(distinct >= rounds, "every writer saved: " .. distinct .. " distinct checkpoints")
  -- The killed writers' temporary files go at the next save.
  ckpt.save(dir .. "/ckpt.safetensors", {w = tpu.zeros {1}, step = 0})
  check.eq(command_line("ls -a " .. dir .. " | grep -c tmp-"), "0")
  rmdir(dir)
end

-- The temporary files of saves whose writers died go at the next save of the path; those of a
-- live process (another rank saving: here PID 1) or of another host stay, as do other paths'.
function T.a_save_removes_the_temporary_files_of_dead_writers()
  local dir = tmpdir()
  local host, dead = command_line("hostname"), command_line("sh -c 'echo $$'")
  local function temp(writer) return dir .. "/.c.safetensors.tmp-" .. writer end
  local stale = {temp(host .. "-" .. dead .. "-0"), temp(dead .. "-3")}  -- also the older names
  local kept = {temp(host .. "-1-0"), temp("elsewhere-" .. dead .. "-0"), temp(host .. "-x-0"),
    dir .. "/.d.safetensors.tmp-" .. host .. "-" .. dead .. "-0"}
  for _, p in ipairs(stale) do write(p, "partial") end
  for _, p in ipairs(kept) do write(p, "partial") end
  ckpt.save_tensors(dir .. "/c.safetensors", {w = tpu.zeros {2}})
  for _, p in ipairs(stale) do check.eq(files.read(p), nil, p) end
  for _, p in ipairs(kept) do check.eq(files.read(p), "partial", p) end
  rmdir(dir)
end

---------------------------------------------------------------- interchange with Python

local PYTHON = "/usr/bin/python3"

-- An independent reader and writer of the published format: json, struct and numpy only.
local PY_CHECK = [=[
import json, struct, sys
import numpy as np
path_in, path_out = sys.argv[1], sys.argv[2]
with open(path_in, "rb") as f:
    raw = f.read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = header.pop("__metadata__")
assert meta["origin"] == "tputrain", meta
types = {"F32": "<f4", "I32": "<i4", "U8": "u1", "BOOL": "?"}
def get(name):
    e = header[name]
    b, end = e["data_offsets"]
    if e["dtype"] == "BF16":
        bits = np.frombuffer(data[b:end], dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(e["shape"])
    return np.frombuffer(data[b:end], dtype=types[e["dtype"]]).reshape(e["shape"])
assert np.array_equal(get("w"), np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1)
assert np.array_equal(get("half"), np.array([0.5, -2, 3.25], dtype=np.float32))
assert np.array_equal(get("ids"), np.array([[1, -2], [2147483647, -2147483648]], dtype=np.int32))
assert np.array_equal(get("pixels"), np.array([0, 128, 255], dtype=np.uint8))
assert np.array_equal(get("mask"), np.array([True, False, True]))
assert get("scalar").shape == () and get("scalar") == 7
spans = sorted(tuple(e["data_offsets"]) for e in header.values())
assert spans[0][0] == 0 and spans[-1][1] == len(data)
assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))

# A file written the way another tool might: reversed order, no padding, metadata last.
tensors = {
    "z.kernel": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    "a.bias": np.array([5, -6, 7], dtype=np.int32),
    "m": np.array([[1, 0], [0, 1]], dtype=np.bool_),
    "u": np.array([9, 8, 7, 6], dtype=np.uint8),
}
out_header, blobs, offset = {}, [], 0
for name in sorted(tensors, reverse=True):
    arr = tensors[name]
    blob = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    dt = {"float32": "F32", "int32": "I32", "bool": "BOOL", "uint8": "U8"}[arr.dtype.name]
    out_header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
bf16 = np.array([1.5, -0.25], dtype=np.float32).view(np.uint32) >> 16
out_header["h"] = {"dtype": "BF16", "shape": [2], "data_offsets": [offset, offset + 4]}
blobs.append(bf16.astype("<u2").tobytes())
out_header["__metadata__"] = {"writer": "python"}
text = json.dumps(out_header).encode()
with open(path_out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
print("ok")
]=]

function T.python_reads_our_files_and_we_read_its_files()
  local dir = tmpdir()
  write(dir .. "/check.py", PY_CHECK)
  ckpt.save_tensors(dir .. "/ours.safetensors", {
    w = tpu.arange(12):cast("f32"):reshape {3, 4} / 4 - 1,
    half = tpu.tensor({0.5, -2, 3.25}, {dtype = "bf16"}),
    ids = tpu.tensor({{1, -2}, {2147483647, -2147483648}}, {dtype = "i32"}),
    pixels = tpu.tensor({0, 128, 255}, {dtype = "u8"}),
    mask = tpu.tensor({1, 0, 1}):gt(0),
    scalar = tpu.tensor(7),
  }, {origin = "tputrain"})
  local p = io.popen(string.format("%s %q %q %q 2>&1", PYTHON, dir .. "/check.py", dir .. "/ours.safetensors",
    dir .. "/theirs.safetensors"))
  local out = p:read("a")
  p:close()
  check.eq(out, "ok\n", "the Python reader")
  local t, meta = ckpt.load_tensors(dir .. "/theirs.safetensors")
  check.eq(meta.writer, "python")
  check.near(t["z.kernel"]:totable(), {{-1, -0.6, -0.2}, {0.2, 0.6, 1}}, 1e-7)
  check.eq(t["a.bias"]:totable(), {5, -6, 7})
  check.eq(t["a.bias"].dtype, "i32")
  check.eq(t.m.dtype, "bool")
  check.eq(t.m:totable(), {{true, false}, {false, true}})
  check.eq(t.u:totable(), {9, 8, 7, 6})
  check.eq(t.h.dtype, "bf16")
  check.eq(t.h:totable(), {1.5, -0.25})
  rmdir(dir)
end

return T
