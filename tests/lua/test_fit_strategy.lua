-- fit and evaluate under strategies: replicated training matches one core, a partial last batch
-- is padded and masked exactly, batches that do not divide by the cores fail early, BatchNorm
-- under replicas, and bitwise determinism across runs and host thread counts.
local tpu = require "tpu"
local check = require "check"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local exe = arg[-1] or "tputrain"

local function problem(n)
  local k = tpu.random.key(5)
  local x = tpu.random.normal(k, {n, 6})
  local y = (x:slice {{}, {1, 1}}:reshape {n} + x:slice {{}, {2, 2}}:reshape {n}):gt(0):cast("i32")
  return x, y
end

-- A small classifier built (and compiled) under `cores` cores, with the same initial weights
-- whatever the cores.
local function model_on(cores, opts)
  opts = opts or {}
  nn.initializers.set_seed(3)
  local s = tpu.strategy.TPU {cores = cores}
  local _ <close> = s:scope()
  local layers = {nn.Dense(8, {activation = "relu"})}
  if opts.batchnorm then layers[#layers + 1] = nn.BatchNorm {sync = opts.sync} end
  layers[#layers + 1] = nn.Dense(2)
  local model = nn.Sequential(layers)
  model:compile {optimizer = opts.optimizer or optim.SGD {lr = 0.1}, loss = "sparse_categorical_crossentropy",
                 metrics = opts.metrics or {"accuracy"}}
  return model
end

local function weights(model)
  local out = {}
  for _, p in ipairs(model:parameters()) do
    for _, v in ipairs(p:reshape {-1}:totable()) do out[#out + 1] = v end
  end
  return out
end

local function fit(model, x, y, batch, epochs)
  return model:fit(data.from_tensors {x, y}:batch(batch), {epochs = epochs or 1, verbose = 0})
end

return {
  ["fit on 2 and 4 cores trains like 1 core at the same global batch"] = function()
    local x, y = problem(64)
    local one = model_on(1)
    local h1 = fit(one, x, y, 16, 3)
    for _, cores in ipairs {2, 4} do
      local m = model_on(cores)
      local h = fit(m, x, y, 16, 3)
      check.near(weights(m), weights(one), 1e-5)
      check.near(h.history.loss[3], h1.history.loss[3], 1e-5)
      check.eq(h.history.accuracy[3], h1.history.accuracy[3])
    end
  end,

  ["a partial last batch is padded and masked: weights and metrics as without padding"] = function()
    local x, y = problem(13)
    for _, cores in ipairs {1, 2} do
      local padded = model_on(cores)
      fit(padded, x, y, 8)  -- batches of 8 and 5 (padded to 8)
      check.eq(padded.compiled.steps.train:stats().compiles, 1)
      -- the reference trains on the same two batches unpadded, one compile per size
      local ref = model_on(1)
      fit(ref, x:slice {{1, 8}}, y:slice {{1, 8}}, 8)
      ref:compile {optimizer = optim.SGD {lr = 0.1}, loss = "sparse_categorical_crossentropy"}
      fit(ref, x:slice {{9, 13}}, y:slice {{9, 13}}, 5)
      check.near(weights(padded), weights(ref), 1e-6)
    end
    local whole = model_on(1):evaluate(data.from_tensors {x, y}:batch(13), {verbose = 0})
    local parts = model_on(2):evaluate(data.from_tensors {x, y}:batch(4), {verbose = 0})  -- 4, 4, 4, 1
    check.near(parts.loss, whole.loss, 1e-6)
    check.eq(parts.accuracy, whole.accuracy)
  end,

  ["a metric that takes no weights: the partial batch runs unpadded, or is refused on cores"] = function()
    local x, y = problem(13)
    local function metric(yt, yp) return (yp:argmax(-1):eq(yt:cast("i32"))):cast("f32"):mean() end
    local one = model_on(1, {metrics = {metric}})
    fit(one, x, y, 8)  -- batches of 8 and 5: two signatures, both exact
    check.eq(one.compiled.steps.train:stats().compiles, 2)
    local two = model_on(2, {metrics = {metric}})
    check.raises(function() fit(two, x, y, 8) end,
      "a partial batch of 5 examples (the others have 8) does not divide by the 2 cores, and padding it is not exact: "
      .. "metric 'metric' takes no per-example weights")
  end,

  ["a global batch that does not divide by the cores fails at fit, before any step"] = function()
    local x, y = problem(40)
    local m = model_on(4)
    check.raises(function() m:fit(data.from_tensors {x, y}:batch(10, {drop_remainder = true}), {verbose = 0}) end,
      "the global batch 10 does not divide by the 4 cores of TPU{cores=4, version=\"v3\"}; use a batch of 8 or 12 (a multiple of 4)")
    check.eq(m.compiled.steps.train, nil)
    -- the validation data too, before the first epoch rather than after it
    local train = data.from_tensors {x, y}:batch(8, {drop_remainder = true})
    local val = data.from_tensors {x, y}:batch(10, {drop_remainder = true})
    check.raises(function() m:fit(train, {verbose = 0, validation_data = val}) end,
      "the global batch 10 does not divide by the 4 cores")
    check.eq(m.compiled.steps.train, nil)
    -- and a batch whose size varies (40 = 2 x 14 + 12): its full size is checked
    local partial = data.from_tensors {x, y}:batch(14)
    check.eq(partial:element_spec().shape[1], -1)
    check.raises(function() m:fit(train, {verbose = 0, validation_data = partial}) end,
      "the global batch 14 does not divide by the 4 cores")
    check.eq(m.compiled.steps.train, nil)
    check.raises(function() m:fit(data.from_tensors {x, y}:batch(6), {verbose = 0}) end,
      "the global batch 6 does not divide by the 4 cores")
    check.eq(m.compiled.steps.train, nil)
  end,

  ["BatchNorm on 2 cores: moving statistics agree; sync = true normalizes like 1 core"] = function()
    local x, y = problem(32)
    local one = model_on(1, {batchnorm = true})
    fit(one, x, y, 16, 2)
    local synced = model_on(2, {batchnorm = true, sync = true})
    fit(synced, x, y, 16, 2)
    check.near(weights(synced), weights(one), 1e-5)
    local local_stats = model_on(2, {batchnorm = true})
    fit(local_stats, x, y, 16, 2)
    local bn = local_stats.modules[2]
    check.eq(bn.moving_mean.shape, {8})  -- one copy, the same on every core
    check.is_true(math.abs(weights(local_stats)[1] - weights(one)[1]) < 0.1)
  end,

  ["the same training is bitwise identical across runs and host thread counts"] = function()
    local script = here .. "/fit_weights.lua"
    local function run(threads, how)
      local p = io.popen(string.format("%s --threads %d %s 4 %s 2>&1", exe, threads, script, how or ""))
      local out = p:read("a")
      p:close()
      return out
    end
    local a, b, c = run(1), run(2), run(2)
    check.is_true(a:find("weights ", 1, true) ~= nil, a)
    check.eq(b, a)
    check.eq(c, a)
    -- fit(x, y) shuffles the rows each epoch: the same order whatever the threads
    local d, e = run(1, "tensors"), run(3, "tensors")
    check.is_true(d:find("weights ", 1, true) ~= nil, d)
    check.eq(e, d)
    check.is_true(d ~= a)
  end,

  -- Each core draws its own dropout masks: the cores get one key, and with it alone core 2's row
  -- kept exactly the features core 1's row kept. Seen in the kernel's gradient: a weight moves
  -- where either row kept its feature, about 3/4 of 4096 with two masks, 1/2 with one.
  ["each core draws its own dropout masks"] = function()
    local s = tpu.strategy.TPU {cores = 2}
    local model
    do
      local _ <close> = s:scope()
      model = nn.Sequential {nn.Dropout(0.5), nn.Dense(1, {use_bias = false, kernel_initializer = "ones"})}
      model:compile {optimizer = optim.SGD {lr = 1e-6}, loss = "mse"}
    end
    model:fit(tpu.ones {2, 4096}, tpu.zeros {2, 1}, {batch_size = 2, epochs = 1, verbose = 0})
    local moved = 0
    for _, v in ipairs(model:parameters()[1]:reshape {-1}:totable()) do
      if v ~= 1 then moved = moved + 1 end
    end
    check.eq(moved > 2800 and moved < 3350, true, "weights moved: " .. moved)
  end,

  -- A model's steps are checked against its own strategy's HBM (TPU version), whatever scope is
  -- open when it trains; closing a scope gives back the version that was before it.
  ["a model's steps use its strategy's TPU version"] = function()
    local device = require "tpu.device"
    local before = device.version()
    local seen
    local Probe = nn.Module:extend("VersionProbe")
    function Probe:call(x)
      seen = device.version()
      return x
    end
    local model
    do
      local _ <close> = tpu.strategy.TPU {cores = 1, version = "v4"}:scope()
      check.eq(device.version(), "v4")
      model = nn.Sequential {Probe(), nn.Dense(1)}
      model:compile {optimizer = "sgd", loss = "mse"}
    end
    check.eq(device.version(), before)
    do
      local _ <close> = tpu.strategy.TPU {cores = 2, version = "v2"}:scope()
      model:fit(tpu.ones {4, 3}, tpu.ones {4, 1}, {batch_size = 4, verbose = 0})
      check.eq(seen, "v4")
      seen = nil
      model:predict(tpu.ones {4, 3})
      check.eq(seen, "v4", "predict")
      check.eq(device.version(), "v2")
    end
    check.eq(device.version(), before)
  end,

  -- Out of HBM on several cores, the advice gives the global batch that fits and more cores
  -- than the strategy has (it said TPU{cores=8} on 8 cores).
  ["out of HBM on 8 cores: the advice counts the cores"] = function()
    local model
    do
      local _ <close> = tpu.strategy.TPU {cores = 8, version = "v2"}:scope()
      model = nn.Sequential {nn.Conv2D(128, 3, {padding = "same"}), nn.UpSampling2D(32), nn.GlobalAvgPool2D(),
                             nn.Dense(1)}
      model:compile {optimizer = "sgd", loss = "mse"}
    end
    local ok, err = pcall(model.fit, model, tpu.ones {4096, 8, 8, 1}, tpu.ones {4096, 1},
                          {batch_size = 4096, verbose = 0})
    check.eq(ok, false)
    check.is_true(err:find("a per-core batch of at most 248 (a global batch of 1984 on these 8 cores; needs",
                           1, true) ~= nil, err)
    check.is_true(err:find("or more cores (TPU{cores=16})", 1, true) ~= nil, err)
  end,

  -- A data set smaller than its batch under a strategy: the first (and only) batch is partial
  -- and is padded up to a multiple of the cores (it failed: "the global batch 10 does not divide
  -- by the 8 cores", after a whole epoch of training).
  ["a first batch smaller than the batch is padded to a multiple of the cores"] = function()
    local model
    do
      local _ <close> = tpu.strategy.TPU {cores = 8}:scope()
      model = nn.Sequential {nn.Dense(2)}
      model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
    end
    local x, y = problem(100)
    local h = model:fit(x, y, {batch_size = 32, epochs = 1, validation_split = 0.1, verbose = 0})
    local one = nn.Sequential {nn.Dense(2)}
    one:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
    one(x)
    one:set_parameters(model:parameters())
    local r = one:evaluate(x:slice {{91, 100}}, y:slice {{91, 100}}, {verbose = 0})
    check.near(h.history.val_loss[1], r.loss, 1e-5)
    check.near(h.history.val_accuracy[1], r.accuracy, 1e-6)
    -- a loss of the user's cannot be padded: the first batch says what is wrong (it said that the
    -- batch 10 does not divide, as if 10 were the user's batch)
    local own
    do
      local _ <close> = tpu.strategy.TPU {cores = 8}:scope()
      own = nn.Sequential {nn.Dense(1)}
      own:compile {optimizer = "sgd", loss = function(t, p) return tpu.losses.mse(t, p) end}
    end
    check.raises(function() own:evaluate(tpu.ones {10, 3}, tpu.ones {10, 1}, {verbose = 0}) end,
      "a batch of 10 examples (the first of its size: a data set smaller than its batch?) does not divide by the 8 cores")
  end,
}
