-- Tests of fit's robustness: resuming from a training checkpoint (at an epoch's end and inside
-- an epoch) ends bitwise equal to a run that never stopped; a non-finite loss stops fit naming
-- the step and the layer; Ctrl-C stops fit with exit status 130 and an intact checkpoint;
-- callbacks get set_model/set_params; lr_scheduler changes the rate without recompiling.
local tpu = require "tpu"
local check = require "check"
local nn, optim, data, cb = tpu.nn, tpu.optim, tpu.data, tpu.callbacks

local T = {}

---------------------------------------------------------------- helpers

local files = require "files"
local sh, tmpdir, rmdir, write, read = files.sh, files.tmpdir, files.rmdir, files.write, files.read

local function exe() return arg[-1] end

-- Runs a script with the interpreter; returns its exit code and stdout.
local function run(script, ...)
  local args = {}
  for i, a in ipairs {...} do args[i] = string.format("%q", a) end
  local p = io.popen(string.format("%q %q %s 2>&1; echo \"exit=$?\"", exe(), script, table.concat(args, " ")))
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit=(%d+)\n$"))
  return code, out:gsub("exit=%d+\n$", "")
end

---------------------------------------------------------------- resuming bitwise

-- One training in every process: dropout (a random key per step), BatchNorm statistics, a data
-- set that reshuffles every pass, Adam with an lr_scheduler. "crash" runs die with an error at
-- a given step, after the checkpoint callback saved what it saves.
local TRAIN = [[
local tpu = require "tpu"
local nn, data, optim, cb = tpu.nn, tpu.data, tpu.optim, tpu.callbacks
local mode, dir, freq, crash_step = arg[1], arg[2], arg[3], tonumber(arg[4])
nn.set_seed(7)
local x = tpu.random.normal(tpu.random.key(3), {96, 6})
local y = (x:sum(2) * 3):cast("i32") % 4
local ds = data.from_tensors {x, y}:shuffle(96, {seed = 5}):batch(16, {drop_remainder = true})
local model = nn.Sequential {nn.Dense(16, {activation = "relu"}), nn.Dropout(0.3), nn.BatchNorm(), nn.Dense(4)}
model:compile {optimizer = optim.Adam {lr = 0.01}, loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
local callbacks = {cb.lr_scheduler(function(epoch, lr) return epoch == 1 and lr or lr * 0.7 end)}
local Crash = cb.Callback:extend("Crash")
function Crash:on_batch_end() if self.model.train_steps == crash_step then error("power cut") end end
local opts = {epochs = 4, verbose = 0, callbacks = callbacks}
if mode == "crash" then
  callbacks[#callbacks + 1] = cb.checkpoint {path = dir .. "/ckpt.safetensors",
                                             save_freq = freq ~= "epoch" and math.tointeger(freq) or nil}
  callbacks[#callbacks + 1] = Crash()
elseif mode == "resume" then
  opts.resume = dir .. "/ckpt.safetensors"
end
local history = model:fit(ds, opts)
model:save(dir .. "/" .. mode .. ".safetensors")
local losses = {}
for e = 1, 4 do losses[e] = string.format("%a", history.history.loss[e]) end
print(table.concat(losses, " "), #history.epoch, model.train_steps)
]]

local function resumes_bitwise(freq, crash_step)
  local dir = tmpdir()
  write(dir .. "/train.lua", TRAIN)
  local code, whole = run(dir .. "/train.lua", "whole", dir, freq, "0")
  check.eq(code, 0, whole)
  code = run(dir .. "/train.lua", "crash", dir, freq, tostring(crash_step))
  check.eq(code, 1, "the crash run ends with an error")
  local resumed
  code, resumed = run(dir .. "/train.lua", "resume", dir, freq, "0")
  check.eq(code, 0, resumed)
  check.eq(resumed, whole, "the history and step count of the resumed run")
  check.is_true(read(dir .. "/whole.safetensors") == read(dir .. "/resume.safetensors"),
    "the resumed run's weights differ from the uninterrupted run's")
  rmdir(dir)
end

-- 6 batches per epoch: a crash in epoch 3 resumes from the end of epoch 2.
function T.resume_after_epoch_2_is_bitwise_identical()
  resumes_bitwise("epoch", 15)
end

-- Saving every 5 steps: the crash at step 17 resumes at step 15, batch 3 of epoch 3.
function T.resume_inside_an_epoch_is_bitwise_identical()
  resumes_bitwise("5", 17)
end

function T.resume_checks_the_checkpoint_against_the_model()
  local dir = tmpdir()
  nn.set_seed(1)
  local x = tpu.random.normal(tpu.random.key(1), {8, 3})
  local ds = data.from_tensors {x, tpu.zeros({8}, {dtype = "i32"})}:batch(4)
  local m = nn.Sequential {nn.Dense(4), nn.Dense(2)}
  m:compile {optimizer = optim.Adam {}, loss = "sparse_categorical_crossentropy"}
  m:fit(ds, {epochs = 1, verbose = 0, callbacks = {cb.checkpoint {path = dir .. "/c.safetensors"}}})
  local sgd = nn.Sequential {nn.Dense(4), nn.Dense(2)}
  sgd:compile {optimizer = optim.SGD {lr = 0.1, momentum = 0.9}, loss = "sparse_categorical_crossentropy"}
  check.raises(function() sgd:fit(ds, {epochs = 2, verbose = 0, resume = dir .. "/c.safetensors"}) end,
    "the optimizer state does not fit optim.SGD{lr = 0.1}: 'velocity.1' is missing in the file")  -- the first by name
  -- fit(x, y) resumes too: the unbuilt model is built from a row of x
  local again = nn.Sequential {nn.Dense(4), nn.Dense(2)}
  again:compile {optimizer = optim.Adam {}, loss = "sparse_categorical_crossentropy"}
  local h = again:fit(x, tpu.zeros({8}, {dtype = "i32"}), {epochs = 2, batch_size = 4, verbose = 0,
                                                          resume = dir .. "/c.safetensors"})
  check.eq(#h.history.loss, 2)
  local wide = nn.Sequential {nn.Dense(5), nn.Dense(2)}
  wide:compile {optimizer = optim.Adam {}, loss = "sparse_categorical_crossentropy"}
  check.raises(function() wide:fit(ds, {epochs = 2, verbose = 0, resume = dir .. "/c.safetensors"}) end,
    "weight '1.kernel'")
  rmdir(dir)
end

---------------------------------------------------------------- non-finite loss

-- Multiplies by a huge number: the output overflows to inf once the input is large.
local function blow_up_model()
  local Boom = nn.Module:extend("Boom")
  function Boom:call(x) return x * 1e30 * 1e30 end
  nn.set_seed(3)
  return nn.Sequential {nn.Dense(4, {activation = "relu"}), Boom(), nn.Dense(3)}
end

-- The weights stay as they were, kept by the optimizer's update (its `where`) or, when the
-- optimizer's update is the user's own, by fit.
function T.nan_loss_stops_fit_naming_the_step_and_the_layer()
  local x = tpu.random.normal(tpu.random.key(5), {32, 5})
  local y = tpu.zeros({32}, {dtype = "i32"})
  local ds = data.from_tensors {x, y}:batch(8)
  local Own = optim.SGD:extend("Own")
  function Own:update(params, grads, state) return optim.SGD.update(self, params, grads, state) end
  for _, opt in ipairs {optim.SGD {lr = 0.1}, Own {lr = 0.1}} do
    local m = blow_up_model()
    m:compile {optimizer = opt, loss = "sparse_categorical_crossentropy"}
    m(x)
    local before = m:parameters()[1]:totable()
    local err = check.raises(function() m:fit(ds, {epochs = 2, verbose = 0}) end,
      "fit: the loss became nan at step 1 (epoch 1, batch 1)")
    check.is_true(err:find("test_fit_robustness.lua:%d+: fit:") ~= nil, "the error names the user's line: " .. err)
    check.is_true(err:find("the first layer whose output is not finite is 'boom_", 1, true) ~= nil, err)
    check.is_true(err:find("(Boom, position 2 in the model)", 1, true) ~= nil, err)
    check.eq(m:parameters()[1]:totable(), before, "the weights are those before the step: " .. tostring(opt))
    check.eq(m.train_steps, 1)
  end
end

function T.inf_loss_from_the_loss_function_says_so()
  local x = tpu.ones {4, 2}
  local y = tpu.tensor({1, 1, 1, 1}):cast("f32")
  local m = nn.Sequential {nn.Dense(1)}
  m:compile {optimizer = optim.SGD {lr = 0.1}, loss = function(t, p) return (p - t):sum() * 0 + 1 / (t - 1):sum() end}
  check.raises(function() m:fit({x, y}, {epochs = 1, verbose = 0, batch_size = 4}) end,
    "every layer's output is finite, so the loss function made it")
end

---------------------------------------------------------------- Ctrl-C

local LONG_FIT = [[
local tpu = require "tpu"
local nn, data, optim, cb = tpu.nn, tpu.data, tpu.optim, tpu.callbacks
local dir = arg[1]
local x = tpu.random.normal(tpu.random.key(3), {512, 64})
local ds = data.from_tensors {x, tpu.zeros({512}, {dtype = "i32"})}:batch(32)
local model = nn.Sequential {nn.Dense(512, {activation = "relu"}), nn.Dense(512), nn.Dense(4)}
model:compile {optimizer = optim.Adam {}, loss = "sparse_categorical_crossentropy"}
local Mark = cb.Callback:extend("Mark")
function Mark:on_epoch_end(epoch)
  if epoch == 2 then io.open(dir .. "/epoch2", "w"):close() end
end
model:fit(ds, {epochs = 100000, verbose = 0, callbacks = {
  cb.checkpoint {path = dir .. "/ckpt.safetensors"}, Mark()}})
]]

function T.ctrl_c_stops_fit_with_130_and_an_intact_checkpoint()
  local dir = tmpdir()
  write(dir .. "/fit.lua", LONG_FIT)
  local shell = io.popen(string.format("%q %q %q 2>%q & echo $!; wait $!; echo $?", exe(), dir .. "/fit.lua",
    dir, dir .. "/err"))
  local pid = shell:read("n")
  for _ = 1, 600 do
    if read(dir .. "/epoch2") then break end
    sh("sleep 0.05")
  end
  check.is_true(read(dir .. "/epoch2") ~= nil, "the run reached epoch 2")
  sh("kill -INT " .. pid)
  local code = shell:read("n")
  shell:close()
  check.eq(code, 130)
  local err = read(dir .. "/err")
  check.is_true(err:find("fit.lua:12: fit: interrupted (SIGINT) after step", 1, true) ~= nil, err)
  local state = tpu.checkpoint.load(dir .. "/ckpt.safetensors")
  check.is_true(state.epoch >= 2)
  check.eq(state.step, state.epoch * 16)
  rmdir(dir)
end

---------------------------------------------------------------- callbacks inside fit

function T.fit_calls_set_model_and_set_params()
  local Spy = cb.Callback:extend("Spy")
  function Spy:set_params(params)
    self.seen = params
    cb.Callback.set_params(self, params)
  end
  local x = tpu.random.normal(tpu.random.key(2), {16, 3})
  local ds = data.from_tensors {x, tpu.zeros({16}, {dtype = "i32"})}:batch(8)
  local m = nn.Sequential {nn.Dense(2)}
  m:compile {optimizer = optim.SGD {lr = 0.1}, loss = "sparse_categorical_crossentropy"}
  local spy, plain = Spy(), {}
  m:fit(ds, {epochs = 2, verbose = 0, validation_data = ds, callbacks = {spy, plain}})
  check.is_true(spy.model == m)
  check.eq(spy.seen.epochs, 2)
  check.eq(spy.seen.steps, 2)
  check.is_true(spy.seen.train_data == ds)
  check.is_true(spy.seen.validation_data == ds)
  check.is_true(plain.model == m, "a plain table gets the fields")
  check.raises(function() m:fit(ds, {verbose = 0, callbacks = {3}}) end, "fit: callbacks[1] is a number, not a callback")
end

return T
