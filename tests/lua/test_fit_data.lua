-- fit's and evaluate's handling of what they are given: endless data sets, partial last batches,
-- elements without targets or with extra parts, the verbose, resume, loss_weights and
-- steps_per_execution options.
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local nn, data = tpu.nn, tpu.data

local T = {}

local function model(opts)
  local m = nn.Sequential {nn.Dense(1, {kernel_initializer = "zeros"})}
  opts = opts or {}
  opts.optimizer, opts.loss = opts.optimizer or "sgd", opts.loss or "mse"
  m:compile(opts)
  return m
end

local function pairs_of(n) return data.from_tensors {tpu.ones {n, 2}, tpu.zeros {n, 1}} end

function T.an_endless_data_set_needs_steps_per_epoch()
  local endless = {
    pairs_of(8):batch(4):cycle(),
    -- A filter's output has no known size: cycled forever it still never ends.
    pairs_of(8):filter(function() return true end):cycle():batch(4),
  }
  for _, ds in ipairs(endless) do
    check.eq(ds:cardinality(), data.INFINITE)
    local m = model()
    check.raises(function() m:fit(ds, {verbose = 0}) end, "fit: the training data set never ends")
    local h = m:fit(ds, {verbose = 0, steps_per_epoch = 3})
    check.eq(m:compile_stats().train.executions, 3)
    check.eq(#h.history.loss, 1)
  end
end

function T.batch_size_is_for_tensors_not_data_sets()
  local m, ds = model(), pairs_of(8):batch(4)
  for _, call in ipairs {
    {"fit", function() m:fit(ds, {batch_size = 2, verbose = 0}) end},
    {"evaluate", function() m:evaluate(ds, {batch_size = 2, verbose = 0}) end},
    {"predict", function() m:predict(data.from_tensors {tpu.ones {8, 2}}:batch(4), {batch_size = 2}) end},
  } do
    local msg = check.raises(call[2], call[1] .. ": batch_size is for tensors; a data set is batched by its own batch(n), e.g. ds:batch(2)")
    check.is_true(msg:match("^[^:]+%.lua:%d+: ") ~= nil, msg)
  end
  -- With tensors it still cuts them, next to a validation data set.
  local h = m:fit({tpu.ones {8, 2}, tpu.zeros {8, 1}}, {batch_size = 4, verbose = 0, validation_data = ds})
  check.eq(m:compile_stats().train.executions, 2)
  check.eq(#h.history.val_loss, 1)
end

function T.a_training_set_known_to_be_empty_is_refused_before_the_first_epoch()
  local m, began = model(), 0
  local cb = {on_train_begin = function() began = began + 1 end}
  check.raises(function() m:fit(pairs_of(1):batch(4, {drop_remainder = true}), {verbose = 0, callbacks = {cb}}) end,
    "fit: the training data set has no batches (its cardinality() is 0)")
  check.eq(began, 0)
end

-- A layer that is finite on its real rows and NaN on a row of zeros (x / sum(x)).
local Normalize = nn.Module:extend("Normalize")
function Normalize:call(v) return v / v:sum(2, true) end

function T.a_partial_batch_is_padded_with_real_rows()
  local x = tpu.random.uniform(tpu.random.key(1), {10, 3}, {minval = 1, maxval = 2})
  local y = x:sum(2, true)
  local m = nn.Sequential {Normalize(), nn.Dense(1)}
  m:compile {optimizer = tpu.optim.SGD {lr = 0.1}, loss = "mse"}
  local whole = m:evaluate(x, y, {batch_size = 10, verbose = 0}).loss
  local partial = m:evaluate(x, y, {batch_size = 4, verbose = 0}).loss  -- 4, 4, then 2 padded to 4
  check.is_true(whole == whole and partial == partial, "finite losses")
  check.near(partial, whole, 1e-5)
  local h = m:fit(x, y, {batch_size = 4, epochs = 2, verbose = 0})
  check.is_true(h.history.loss[2] < h.history.loss[1], "it trains")
end

function T.elements_need_targets()
  local m = model()
  local msg = check.raises(function() m:fit(data.from_tensors {tpu.ones {8, 2}}:batch(4), {verbose = 0}) end,
    "fit: the data set's elements have no targets; make it with data.from_tensors {x, y}")
  check.is_true(msg:find("test_fit_data.lua:%d+: fit") ~= nil, msg)
  local four = data.from_tensors {tpu.ones {4, 2}, tpu.ones {4, 1}, tpu.ones {4}, tpu.ones {4}}:batch(4)
  check.raises(function() m:evaluate(four, {verbose = 0}) end,
    "evaluate: the data set's elements have a fourth part (a tensor f32[4]); give {x, y} or {x, y, sample_weight}")
end

-- Keras's third part of an element: each example's loss is weighted, and the sum is divided by
-- the number of examples (not by the weights' sum); metrics count every example.
function T.sample_weights_weight_the_loss()
  local m = model {metrics = {"mse"}}
  local x, y = tpu.ones {4, 2}, tpu.tensor {{1}, {2}, {3}, {4}}  -- squared errors 1, 4, 9, 16
  local weighted = data.from_tensors {x, y, tpu.tensor {1, 0, 0, 0}}
  for _, size in ipairs {4, 3} do  -- 3: the last batch is padded
    local r = m:evaluate(weighted:batch(size), {verbose = 0})
    check.near(r.loss, 0.25, 1e-6)
    check.near(r.mse, 7.5, 1e-6)
  end
  local h = m:fit(data.from_tensors {x, y, tpu.tensor {2, 0, 0, 0}}:batch(2), {verbose = 0})
  check.near(h.history.loss[1], 0.5, 1e-6)
  -- Only the first example pulls the weights: the prediction moves towards 1.
  check.is_true(m:predict(tpu.ones {1, 2}):item() > 0, "it trains on the weighted example")
  check.raises(function() m:evaluate(data.from_tensors {x, y, tpu.ones {4, 2}}:batch(4), {verbose = 0}) end,
    "evaluate: the third part of the data set's elements is the sample weights, one per example "
    .. "(a [4] tensor here), got a tensor f32[4,2]")
  check.raises(function() m:fit(pairs_of(4):batch(4), {verbose = 0,
    validation_data = data.from_tensors {x, y, tpu.ones {4, 1}}:batch(4)}) end,
    "fit: validation_data: the third part of the data set's elements is the sample weights")
  local own = nn.Sequential {nn.Dense(1)}
  own:compile {optimizer = "sgd", loss = function(yt, yp) return ((yt - yp) ^ 2):mean() end}
  check.raises(function() own:evaluate(weighted:batch(4), {verbose = 0}) end,
    "evaluate: sample weights need a built-in loss")
end

-- validation_data is checked before the first step, not after a whole epoch of training.
function T.validation_data_is_checked_before_training()
  local m = model()
  local x, y = tpu.ones {8, 2}, tpu.zeros {8, 1}
  local function fit_with(v) m:fit(x, y, {verbose = 0, validation_data = v}) end
  check.raises(function() fit_with(5) end,
    "fit: validation_data must be a data set or an {x, y} pair of tensors, got 5")
  check.raises(function() fit_with(data.from_tensors {x, y}:take(0):batch(2)) end,
    "fit: validation_data: the data set produced no batches")
  check.raises(function() fit_with(data.from_tensors {x, y}:batch(2):cycle()) end,
    "fit: validation_data never ends")
  check.raises(function() fit_with(data.from_tensors {x, y}:filter(function() return false end):batch(2)) end,
    "fit: validation_data: the data set produced no batches")
  check.eq(m:compile_stats().train.executions, 1, "only the last one trained (its filter shows no batch after)")
end

function T.verbose_is_checked()
  local m = model()
  check.raises(function() m:fit(tpu.ones {4, 2}, tpu.zeros {4, 1}, {verbose = "loud"}) end,
    'fit: verbose must be 0, 1, 2, "auto" or a boolean, got "loud"')
  check.raises(function() m:evaluate(tpu.ones {4, 2}, tpu.zeros {4, 1}, {verbose = -1}) end,
    'evaluate: verbose must be 0, 1, 2, "auto" or a boolean, got -1')
  check.raises(function() m:predict(tpu.ones {4, 2}, {batch_size = 2, verbose = 3}) end,
    'predict: verbose must be 0, 1, 2, "auto" or a boolean, got 3')
  check.eq(m:fit(tpu.ones {4, 2}, tpu.zeros {4, 1}, {verbose = false}).history.loss[1], 0)
  check.eq(m:evaluate(tpu.ones {4, 2}, tpu.zeros {4, 1}, {verbose = "auto"}).loss, 0)  -- Keras's default
end

-- The batches a host map sees, in order, while fit trains on 5 batches of 2 rows (cycled
-- forever when `endless`).
local function batches_seen(fit_opts, m, endless)
  local x = tpu.arange(10):cast("f32"):reshape {10, 1}
  local seen = {}
  local ds = data.from_tensors {x, x * 2}:batch(2):map(function(a, b)
    seen[#seen + 1] = a:totable()[1][1]
    return a, b
  end, {host = true})
  if endless then ds = ds:cycle() end
  m = m or model()
  fit_opts.verbose = 0
  m:fit(ds, fit_opts)
  return seen, m
end

-- As in Keras, an epoch of steps_per_epoch steps continues where the last one stopped; a pass
-- that ends ends its epoch, and the next one starts a new pass.
function T.steps_per_epoch_epochs_continue_the_pass()
  check.eq(batches_seen {epochs = 4, steps_per_epoch = 2}, {0, 2, 4, 6, 8, 0, 2})
  check.eq(batches_seen {epochs = 3, steps_per_epoch = 4}, {0, 2, 4, 6, 8, 0, 2, 4, 6})
  check.eq(batches_seen {epochs = 2, steps_per_epoch = 5}, {0, 2, 4, 6, 8, 0, 2, 4, 6, 8})
  check.eq(batches_seen {epochs = 2}, {0, 2, 4, 6, 8, 0, 2, 4, 6, 8})
  -- An endless data set starts a new pass each epoch: a position inside its one pass could only
  -- be resumed by making every batch before it again.
  check.eq(batches_seen({epochs = 3, steps_per_epoch = 2}, nil, true), {0, 2, 0, 2, 0, 2})
end

-- Tensors given to fit resume from an epoch's checkpoint with steps_per_epoch too.
function T.tensors_with_steps_per_epoch_resume_from_a_checkpoint()
  local path = files.tmpname()
  local x = tpu.arange(10):cast("f32"):reshape {10, 1}
  local stop = {on_epoch_end = function(self, epoch) if epoch == 1 then self.model.stop_training = true end end}
  local a = model()
  a:fit(x, x * 2, {batch_size = 2, steps_per_epoch = 2, epochs = 3, verbose = 0,
                   callbacks = {tpu.callbacks.checkpoint {path = path}, stop}})
  local b = model()
  b(tpu.ones {1, 1})
  b:fit(x, x * 2, {batch_size = 2, steps_per_epoch = 2, epochs = 3, verbose = 0, resume = path})
  check.eq(b:compile_stats().train.executions, 4)
  os.remove(path)
end

-- A checkpoint at an epoch's end inside a pass (and one inside an epoch) resumes there: the same
-- batches and the same weights, bitwise, as the run that never stopped.
function T.resuming_inside_a_continued_pass_is_bitwise_the_same()
  local dir = files.tmpdir()
  local whole_seen, whole = batches_seen {epochs = 4, steps_per_epoch = 2}
  for _, freq in ipairs {"epoch", 3} do
    local path = dir .. "/ckpt.safetensors"
    os.remove(path)
    local stop = {on_epoch_end = function(self, epoch) if epoch == 2 then self.model.stop_training = true end end}
    local save = tpu.callbacks.checkpoint {path = path, save_freq = freq}
    local first = batches_seen {epochs = 4, steps_per_epoch = 2, callbacks = {save, stop}}
    if freq == "epoch" then check.eq(first, {0, 2, 4, 6}) end
    local m = model()
    m(tpu.ones {1, 1})
    local rest = batches_seen({epochs = 4, steps_per_epoch = 2, resume = path}, m)
    -- The resumed pass makes its first batches again, dropped, so its random maps match. After
    -- epoch 2 the training takes 8, 0, 2; after step 3 (inside epoch 2) 6, 8, 0, 2.
    check.eq(rest, {0, 2, 4, 6, 8, 0, 2})
    check.eq(m:compile_stats().train.executions, freq == "epoch" and 3 or 4)
    check.eq(m:parameters()[1]:totable(), whole:parameters()[1]:totable())
    check.eq(m:parameters()[2]:totable(), whole:parameters()[2]:totable())
  end
  check.eq(whole_seen, {0, 2, 4, 6, 8, 0, 2})
  os.execute("rm -rf " .. dir)
end

function T.resume_from_a_missing_file_starts_from_scratch()
  local path = files.tmpname()
  os.remove(path)
  local a, b = model(), model()
  local ha = a:fit(pairs_of(8):batch(4), {verbose = 0, epochs = 2, resume = path})
  local hb = b:fit(pairs_of(8):batch(4), {verbose = 0, epochs = 2})
  check.eq(ha.history.loss, hb.history.loss)
end

function T.loss_weights_scale_a_single_output_and_are_checked()
  local x, y = tpu.ones {4, 2}, tpu.full({4, 1}, 3)
  check.near(model():evaluate(x, y, {verbose = 0}).loss, 9, 1e-6)
  check.near(model {loss_weights = {10}}:evaluate(x, y, {verbose = 0}).loss, 90, 1e-5)
  check.raises(function() model {loss_weights = {1, 2}} end,
    "compile: loss_weights must be a list of 1 number, one per output, got {1, 2}")
  check.raises(function() model {loss_weights = {"junk"}} end, "compile: loss_weights must be a list of 1 number")
end

function T.steps_per_execution_is_checked()
  local m = model {steps_per_execution = 4}
  m:fit(tpu.ones {16, 2}, tpu.zeros {16, 1}, {batch_size = 2, verbose = 0})
  check.eq(m:compile_stats().train.executions, 8)
  check.raises(function() model {steps_per_execution = -3} end,
    "compile: steps_per_execution must be a positive integer, got -3")
  check.raises(function() model {steps_per_execution = "banana"} end,
    'compile: steps_per_execution must be a positive integer, got "banana"')
end

-- x and y with different row counts: the extra rows were never used without a word (or the
-- error came from inside slice, after steps had run); an empty validation pair was found after
-- the first epoch.
function T.tensor_pairs_need_one_row_per_example()
  local m = model()
  local x8, y8 = tpu.ones {8, 2}, tpu.ones {8, 1}
  m(x8)
  local before = m:parameters()
  check.raises(function() m:fit(x8:slice {{1, 6}}, y8, {batch_size = 4, verbose = 0}) end,
    "fit: x has 6 rows but y has 8; every tensor needs one row per example")
  check.raises(function() m:evaluate(x8:slice {{1, 6}}, y8, {verbose = 0}) end, "evaluate: x has 6 rows but y has 8")
  check.raises(function() m:fit(x8, tpu.zeros {7, 1}, {verbose = 0}) end, "fit: x has 8 rows but y has 7")
  check.raises(function()
    m:fit(x8, y8, {verbose = 0, validation_data = {x8:slice {{1, 0}}, y8:slice {{1, 0}}}})
  end, "fit: validation_data has no rows")
  check.raises(function() m:fit(x8, y8, {verbose = 0, validation_data = {x8, y8:slice {{1, 3}}}}) end,
    "fit: validation_data: x has 8 rows but y has 3")
  check.eq(m:parameters()[1]:totable(), before[1]:totable(), "no step ran")
end

-- Keras's fit(x, [y1, y2]) and evaluate({x, {y1, y2}}) for a model of two outputs.
function T.a_list_of_targets_for_a_model_of_two_outputs()
  local inp = nn.Input {shape = {2}}
  local h = nn.Dense(3)(inp)
  local two = nn.Model {inputs = inp, outputs = {nn.Dense(1)(h), nn.Dense(2)(h)}}
  two:compile {optimizer = "sgd", loss = {"mse", "mse"}}
  local x, ya, yb = tpu.ones {8, 2}, tpu.ones {8, 1}, tpu.ones {8, 2}
  local h1 = two:fit(x, {ya, yb}, {batch_size = 4, verbose = 0})
  check.eq(#h1.history.loss, 1)
  local a = two:evaluate({x, {ya, yb}}, {verbose = 0}).loss
  local b = two:evaluate(data.from_tensors {x, {ya, yb}}:batch(32), {verbose = 0}).loss
  check.near(a, b, 1e-6)
  check.raises(function() two:fit(x, {ya, tpu.ones {6, 2}}, {verbose = 0}) end, "fit: x has 8 rows but y[2] has 6")
end

-- A built-in loss beside a function of the user's: both give the batch mean (the built-in one
-- gave per-example values, and the statistics failed to stack: "concat needs operands ...").
function T.a_built_in_loss_beside_a_function_of_the_users()
  local inp = nn.Input {shape = {2}}
  local h = nn.Dense(3, {kernel_initializer = "ones"})(inp)
  local two = nn.Model {inputs = inp, outputs = {nn.Dense(1, {kernel_initializer = "ones"})(h),
                                                 nn.Dense(1, {kernel_initializer = "ones"})(h)}}
  two:compile {optimizer = "sgd", loss = {"mse", function(y, p) return tpu.losses.mse(y, p) end}}
  local x, ya, yb = tpu.ones {4, 2}, tpu.zeros {4, 1}, tpu.ones {4, 1}
  check.near(two:evaluate(data.from_tensors {x, {ya, yb}}:batch(4), {verbose = 0}).loss, 36 + 25, 1e-4)
end

-- Keras's fit([x1, x2], y) for a model of two inputs (it took the list for an {x, y} pair), and
-- two metrics of one name are refused (the second hid the first in the logs).
function T.a_list_of_inputs_and_metric_names()
  local a, b = nn.Input {shape = {3}}, nn.Input {shape = {2}}
  local m = nn.Model {inputs = {a, b}, outputs = nn.Dense(1)(nn.Concatenate {axis = -1} {a, b})}
  m:compile {optimizer = "sgd", loss = "mse"}
  local x1, x2, y = tpu.ones {8, 3}, tpu.ones {8, 2}, tpu.ones {8, 1}
  check.eq(#m:fit({x1, x2}, y, {batch_size = 4, verbose = 0}).history.loss, 1)
  check.near(m:evaluate({x1, x2}, y, {verbose = 0}).loss,
    m:evaluate(data.from_tensors {{x1, x2}, y}:batch(8), {verbose = 0}).loss, 1e-6)
  check.raises(function() m:fit({x1, tpu.ones {6, 2}}, y, {verbose = 0}) end, "fit: x has 8 rows but x[2] has 6")
  local h = m:fit({x1, x2}, y, {batch_size = 4, verbose = 0, validation_data = {{x1, x2}, y}})
  check.eq(#h.history.val_loss, 1)
  check.eq(m:predict({x1, x2}).shape, {8, 1})
  check.eq(m:predict({x1, x2}, {batch_size = 3}).shape, {8, 1})
  -- and lists on both sides, for a model of two inputs and two outputs
  local h2 = nn.Concatenate {axis = -1} {a, b}
  local two = nn.Model {inputs = {a, b}, outputs = {nn.Dense(1)(h2), nn.Dense(2)(h2)}}
  two:compile {optimizer = "sgd", loss = {"mse", "mse"}}
  local y2 = tpu.ones {8, 2}
  check.eq(#two:fit({x1, x2}, {y, y2}, {batch_size = 4, verbose = 0}).history.loss, 1)
  check.near(two:evaluate({x1, x2}, {y, y2}, {verbose = 0}).loss,
    two:evaluate(data.from_tensors {{x1, x2}, {y, y2}}:batch(8), {verbose = 0}).loss, 1e-6)
  check.raises(function() model {metrics = {"mse", tpu.metrics.mse}} end, "compile: two metrics are named 'mse'")
end

return T
