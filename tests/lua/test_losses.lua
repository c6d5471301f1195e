-- Tests of tpu.losses and tpu.metrics against hand-computed values.
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"
local losses, metrics = tpu.losses, tpu.metrics

local T = {}

local logits = {{1, 2, 3}, {1, 1, 1}}
-- row 1: log(e + e^2 + e^3) - 3 = 0.40760596; row 2: log 3 = 1.09861229; mean 0.75310912
local expected = (math.log(math.exp(1) + math.exp(2) + math.exp(3)) - 3 + math.log(3)) / 2

function T.sparse_cce_from_logits_any_integer_labels()
  for _, dtype in ipairs {"u8", "i32"} do
    local y = tpu.tensor({2, 0}, {dtype = dtype})
    check.near(losses.sparse_categorical_crossentropy(y, tpu.tensor(logits), {from_logits = true}):item(), expected, 1e-5, dtype)
  end
end

function T.sparse_cce_accepts_trailing_unit_axis()
  local y = tpu.tensor({{2}, {0}}, {dtype = "i32"})
  check.near(losses.sparse_categorical_crossentropy(y, tpu.tensor(logits), {from_logits = true}):item(), expected, 1e-5)
end

function T.sparse_cce_from_probabilities()
  local probs = tpu.tensor {{0.2, 0.3, 0.5}, {0.25, 0.25, 0.5}}
  local y = tpu.tensor({2, 1}, {dtype = "i32"})
  local v = losses.sparse_categorical_crossentropy(y, probs, {from_logits = false}):item()
  check.near(v, -(math.log(0.5) + math.log(0.25)) / 2, 1e-5)
  -- called directly, a loss takes probabilities by default, as Keras's do
  check.near(losses.sparse_categorical_crossentropy(y, probs):item(), v, 0)
end

function T.sparse_cce_shape_mismatch()
  local y = tpu.tensor({1, 2, 0}, {dtype = "i32"})
  check.raises(function() losses.sparse_categorical_crossentropy(y, tpu.tensor(logits)) end,
    "labels i32%[3%] do not match predictions f32%[2,3%] %(expected labels of shape %[2%]%)")
  local one = tpu.tensor({1}, {dtype = "i32"})
  check.raises(function() losses.sparse_categorical_crossentropy(one, tpu.zeros {1, 0}) end,
    "predictions f32%[1,0%] have no classes")
end

function T.sparse_cce_gradient_is_softmax_minus_onehot()
  local y = tpu.tensor({2, 0}, {dtype = "i32"})
  local g = tpu.grad(function(z) return losses.sparse_categorical_crossentropy(y, z, {from_logits = true}) end)(tpu.tensor(logits))
  local gt = g:totable()
  local s = math.exp(1) + math.exp(2) + math.exp(3)
  check.near(gt[1][3], (math.exp(3) / s - 1) / 2, 1e-4)
  check.near(gt[2][2], (1 / 3) / 2, 1e-4)
end

-- The label's log-probability is gathered: each position's loss and the gradient are bitwise
-- those of the one-hot selection summed over the classes, traced or not, and the compiled step
-- compares no one-hot of the logits' shape ([2, 3, 7] here) with the labels. An ignore_class
-- outside the classes selects nothing, as the one-hot did: class 0's -inf logit read in its
-- place made the loss NaN (the gradient's zeros of ignored positions may differ in sign).
function T.sparse_cce_gathers_the_label_with_the_one_hot_selection_bits()
  local z = tpu.random.normal(tpu.random.key(4), {2, 3, 7}) * 4
  local y = tpu.tensor({{0, 6, 3}, {2, 2, 5}}, {dtype = "i32"})
  local function gathered(logits)  -- each position's cross-entropy
    return (losses._token_crossentropy("sparse_categorical_crossentropy", y, logits, true))
  end
  local function selected(logits) return -tpu.core.where(y:one_hot(7):gt(0), logits:log_softmax(-1), 0):sum(-1) end
  check.eq(gathered(z):eq(selected(z)):cast("i32"):sum():item(), 6)
  for _, wrap in ipairs {function(f) return f end, tpu.jit} do
    local v1, g1 = wrap(tpu.value_and_grad(function(l) return gathered(l):sum() end))(z)
    local v2, g2 = wrap(tpu.value_and_grad(function(l) return selected(l):sum() end))(z)
    check.eq(v1:item(), v2:item())
    check.eq(g1:eq(g2):cast("i32"):sum():item(), 42)
  end
  local masked = z * tpu.tensor({0, 1, 1, 1, 1, 1, 1}) + tpu.tensor({-math.huge, 0, 0, 0, 0, 0, 0})
  local padded = tpu.tensor({{-1, 6, 3}, {2, -1, 5}}, {dtype = "i32"})
  local keep = padded:ne(-1)
  local want = -tpu.core.where(keep, tpu.core.where(padded:one_hot(7):gt(0), masked:log_softmax(-1), 0):sum(-1), 0)
  want = want:sum() / keep:cast("f32"):sum()
  local opts = {from_logits = true, ignore_class = -1}
  for _, wrap in ipairs {function(f) return f end, tpu.jit} do
    local got = wrap(function(l) return losses.sparse_categorical_crossentropy(padded, l, opts) end)(masked)
    check.near(got:item(), want:item(), 1e-6)
  end
  local step = tpu.jit(function(logits, labels)
    local function loss(l) return losses.sparse_categorical_crossentropy(labels, l, {from_logits = true}) end
    return tpu.grad(loss)(logits)
  end)
  step(z, y)
  check.is_true(not step.last.exe:text():find("compare bool[2,3,7]", 1, true), step.last.exe:text())
end

function T.categorical_and_binary_and_mse()
  local onehot = tpu.tensor {{0, 0, 1}, {1, 0, 0}}
  check.near(losses.categorical_crossentropy(onehot, tpu.tensor(logits), {from_logits = true}):item(), expected, 1e-5)
  local z = tpu.tensor {{1}, {0}}
  local p = tpu.tensor {{0.8}, {0.4}}
  check.near(losses.binary_crossentropy(z, p):item(), -(math.log(0.8) + math.log(0.6)) / 2, 1e-5)
  local x = tpu.tensor {{2}, {-1}}
  local sig = function(v) return 1 / (1 + math.exp(-v)) end
  check.near(losses.binary_crossentropy(z, x, {from_logits = true}):item(),
    -(math.log(sig(2)) + math.log(1 - sig(-1))) / 2, 1e-5)
  check.near(losses.mse(tpu.tensor {1, 2}, tpu.tensor {2, 4}):item(), 2.5, 1e-6)
end

function T.get_by_name_or_function()
  check.eq(losses.get("mse"), losses.mse)
  local f = function(a, b) return (a - b):sum() end
  check.eq(losses.get(f), f)
  check.raises(function() losses.get("hinge") end, 'unknown loss "hinge"')
end

function T.accuracy_partial_sums()
  local y = tpu.tensor({2, 1, 0}, {dtype = "u8"})
  local scores = tpu.tensor {{0, 1, 5}, {3, 1, 0}, {9, 1, 1}}
  local num, den = metrics.accuracy.partial(y, scores)
  check.near(num:item(), 2, 0)
  check.near(den:item(), 3, 0)
  check.near(metrics.accuracy(y, scores):item(), 2 / 3, 1e-6)
  check.eq(metrics.get("accuracy"), metrics.accuracy)
  check.raises(function() metrics.get("f1") end, 'unknown metric "f1"')
end

-- "accuracy" as Keras chooses it by the shapes: one output unit is binary (it took the argmax
-- of one column, always class 0: 1/3 here where every prediction is right); one-hot labels take
-- their argmax (it refused f32[4,2] labels against f32[4,2] predictions).
function T.accuracy_binary_and_one_hot()
  local x = tpu.tensor {{-2}, {-1}, {1}, {2}, {3}, {4}}
  local y = tpu.tensor {{0}, {0}, {1}, {1}, {1}, {1}}
  for _, activation in ipairs {"sigmoid", "linear"} do
    local m = tpu.nn.Sequential {tpu.nn.Dense(1, {activation = activation, kernel_initializer = "ones"})}
    m:compile {optimizer = "sgd", loss = "binary_crossentropy", metrics = {"accuracy"}}
    check.near(m:evaluate(x, y, {verbose = 0}).accuracy, 1, 0, activation)
  end
  check.near(metrics.accuracy(tpu.tensor {1, 0, 1}, tpu.tensor {{0.5}, {-0.5}, {-1}}):item(), 2 / 3, 1e-6)
  local one_hot = tpu.tensor {{1, 0}, {0, 1}, {0, 1}, {0, 1}}
  local scores = tpu.tensor {{0.9, 0.1}, {0.2, 0.8}, {0.6, 0.4}, {0.3, 0.7}}
  check.near(metrics.accuracy(one_hot, scores):item(), 0.75, 1e-6)
  check.near(metrics.accuracy(one_hot:cast("i32"), scores):item(), 0.75, 1e-6, "integer one-hot labels")
  check.raises(function() metrics.accuracy(tpu.tensor {1, 0}, tpu.tensor {{0.5}, {-0.5}, {-1}}) end,
    "accuracy: labels f32[2] do not match predictions f32[3,1]")
end

-- A class id outside the predictions' classes is an error, called eagerly or in fit and
-- evaluate (one_hot made it a zero row: a loss of 0, and training went on); ignore_class may
-- be outside (-1, as a padding id).
function T.sparse_labels_outside_the_classes_are_refused()
  local message = "sparse_categorical_crossentropy: label 5 is outside the 2 classes of the predictions"
  check.raises(function()
    losses.sparse_categorical_crossentropy(tpu.tensor({5}, {dtype = "i32"}), tpu.tensor {{0.2, 0.8}})
  end, message)
  local m = tpu.nn.Sequential {tpu.nn.Dense(2)}
  m:compile {optimizer = "adam", loss = "sparse_categorical_crossentropy"}
  local x = tpu.ones {4, 3}
  check.raises(function() m:fit(x, tpu.tensor({0, 5, 0, 1}, {dtype = "i32"}), {verbose = 0}) end, message)
  check.raises(function() m:evaluate(x, tpu.tensor({0, 1, 0, -1}, {dtype = "i32"}), {verbose = 0}) end,
    "label -1 is outside the 2 classes")
  local m2 = tpu.nn.Sequential {tpu.nn.Dense(3)}
  m2:compile {optimizer = "sgd", loss = losses.SparseCategoricalCrossentropy {from_logits = true, ignore_class = -1}}
  local loss = m2:fit(x, tpu.tensor({0, -1, 2, 1}, {dtype = "i32"}), {verbose = 0}).history.loss[1]
  check.is_true(loss == loss and loss > 0, tostring(loss))
end

-- Targets that differ by a trailing unit axis are reshaped, as Keras squeezes: the mse metric
-- broadcast [4] against [4, 1] into [4, 4] (3.5 here, Keras 0.25) and the losses refused it.
function T.targets_with_a_trailing_unit_axis_are_matched()
  local x, y = tpu.tensor {{1}, {2}, {3}, {4}}, tpu.tensor {1, 2, 3, 5}
  local m = tpu.nn.Sequential {tpu.nn.Dense(1, {kernel_initializer = "ones", use_bias = false})}
  m:compile {optimizer = "sgd", loss = "mse", metrics = {"mse"}}
  local r = m:evaluate(x, y, {verbose = 0})
  check.near(r.loss, 0.25, 1e-6)
  check.near(r.mse, 0.25, 1e-6)
  check.near(metrics.mse(tpu.tensor {{1}, {2}}, tpu.tensor {1, 4}):item(), 2, 1e-6)
  check.near(losses.binary_crossentropy(tpu.tensor {1, 0}, tpu.tensor {{0.5}, {0.5}}):item(), math.log(2), 1e-5)
  check.raises(function() metrics.mse(tpu.ones {4, 2}, tpu.ones {4, 3}) end,
    "mse: targets f32[4,2] do not match predictions f32[4,3]")
end

function T.top_k_accuracy()
  local scores = tpu.tensor {{0.1, 0.5, 0.2, 0.9}, {0.3, 0.2, 0.1, 0.0}, {0.4, 0.4, 0.1, 0.2}}
  local y = tpu.tensor({2, 0, 1}, {dtype = "u8"})
  -- ranks of the true class: 3rd, 1st, tied 1st
  check.near(metrics.top_k_accuracy {k = 1}(y, scores):item(), 2 / 3, 1e-6)
  check.near(metrics.top_k_accuracy {k = 2}(y, scores):item(), 2 / 3, 1e-6)
  check.near(metrics.top_k_accuracy {k = 3}(y, scores):item(), 1, 1e-6)
  check.near(metrics.top_k_accuracy(y, scores):item(), 1, 1e-6)  -- k = 5
  check.near(metrics.top_k_accuracy {k = 1}(y:reshape({3, 1}), scores):item(), 2 / 3, 1e-6)
  local num, den = metrics.top_k_accuracy.partial(y, scores)
  check.eq({num:item(), den:item()}, {3, 3})
  check.eq(metrics.get("top_k_accuracy"), metrics.top_k_accuracy)
  check.raises(function() metrics.top_k_accuracy {k = 0} end, "top_k_accuracy: k must be a positive integer, got 0")
  check.raises(function() metrics.top_k_accuracy {n = 2} end, "top_k_accuracy: unknown option 'n'")
  check.raises(function() metrics.accuracy {k = 2} end, "metrics.accuracy takes no options, got {k=2}")
  check.raises(function() metrics.top_k_accuracy(tpu.tensor({1, 2}, {dtype = "i32"}), scores) end,
    "top_k_accuracy: labels i32%[2%] do not match predictions f32%[3,4%]")
end

function T.mse_metric()
  local num, den = metrics.mse.partial(tpu.tensor {{1, 2}}, tpu.tensor {{2, 4}})
  check.eq({num:item(), den:item()}, {5, 2})
  check.near(metrics.get("mse")(tpu.tensor {1, 2}, tpu.tensor {2, 4}):item(), 2.5, 1e-6)
end

-- Keras's rule for a loss by name: a final softmax's (sigmoid's) logits are used, never
-- softmax(softmax(x)); any output but the other activation's is taken as logits.
local function dense_model(activation, units)
  local model = tpu.nn.Sequential {tpu.nn.Dense(units or 3, {activation = activation})}
  model:compile {optimizer = "sgd", loss = units == 1 and "binary_crossentropy" or "sparse_categorical_crossentropy"}
  return model
end

function T.loss_by_name_reads_the_logits_of_a_final_softmax()
  local x = tpu.tensor {{1, 2}, {-1, 0.5}, {0, 3}, {2, -2}}
  local y = tpu.tensor({2, 0, 1, 1}, {dtype = "i32"})
  local ds = tpu.data.from_tensors {x, y}:batch(4)
  local plain, soft = dense_model(nil), dense_model("softmax")
  plain(x)
  soft(x)
  soft:set_parameters(plain:parameters())
  local z = plain(x)
  local want = losses.sparse_categorical_crossentropy(y, z, {from_logits = true}):item()
  check.near(plain:evaluate(ds, {verbose = 0}).loss, want, 1e-5)
  check.near(soft:evaluate(ds, {verbose = 0}).loss, want, 1e-5)
  -- the same with sigmoid and binary_crossentropy
  local yb = tpu.tensor {{1}, {0}, {1}, {0}}
  local dsb = tpu.data.from_tensors {x, yb}:batch(4)
  local lin, sig = dense_model(nil, 1), dense_model("sigmoid", 1)
  lin(x)
  sig(x)
  sig:set_parameters(lin:parameters())
  local wantb = losses.binary_crossentropy(yb, lin(x), {from_logits = true}):item()
  check.near(lin:evaluate(dsb, {verbose = 0}).loss, wantb, 1e-5)
  check.near(sig:evaluate(dsb, {verbose = 0}).loss, wantb, 1e-5)
end

-- The output of the other probability activation is read as probabilities: a softmax under
-- binary_crossentropy gave sigmoid(softmax(x)) (0.7241 here, Keras 0.6931).
function T.loss_by_name_reads_the_other_activation_as_probabilities()
  local m = tpu.nn.Sequential {tpu.nn.Dense(2, {activation = "softmax", kernel_initializer = "ones", use_bias = false})}
  m:compile {optimizer = "sgd", loss = "binary_crossentropy"}
  local x = tpu.tensor {{1, 0}, {0, 1}}
  check.near(m:evaluate(x, x, {verbose = 0}).loss, math.log(2), 1e-5)
  local s = tpu.nn.Sequential {tpu.nn.Dense(3, {activation = "sigmoid", kernel_initializer = "zeros"})}
  s:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}
  local labels = tpu.tensor({0, 2}, {dtype = "i32"})
  -- probabilities 0.5 each, divided by their sum as Keras does (1/3 each): unnormalized, a
  -- sigmoid's outputs would all grow towards 1 to lower the loss
  check.near(s:evaluate(x, labels, {verbose = 0}).loss, -math.log(1 / 3), 1e-5)
end

-- A layer that only moves or drops values (Flatten, Reshape, Cropping2D, Dropout) keeps a
-- softmax's (sigmoid's) output probabilities: a loss by name read them as logits (0.8964 and
-- accuracy 0.1719 where 0.9731 and 0.5 were right, here with other data).
function T.probabilities_survive_shape_only_layers()
  local nn = tpu.nn
  local x = tpu.tensor {{1, 2}, {-1, 0.5}, {0, 3}, {2, -2}}
  local yb = tpu.tensor {{1}, {0}, {1}, {0}}
  local lin = tpu.nn.Sequential {nn.Dense(1)}
  local z = lin(x)
  local want = losses.binary_crossentropy(yb, z, {from_logits = true}):item()
  local hits = 0  -- binary accuracy from the logits: class 1 where z > 0
  for i, v in ipairs(z:reshape {4}:totable()) do
    hits = hits + (((v > 0) == (yb:totable()[i][1] > 0.5)) and 1 or 0)
  end
  for _, tail in ipairs {nn.Flatten(), nn.Dropout(0.5), nn.Reshape {1}} do
    local m = nn.Sequential {nn.Dense(1, {activation = "sigmoid"}), tail}
    m:compile {optimizer = "sgd", loss = "binary_crossentropy", metrics = {"accuracy"}}
    m(x)
    m:set_parameters(lin:parameters())
    local r = m:evaluate(x, yb, {verbose = 0})
    check.near(r.loss, want, 1e-5, tostring(tail))
    check.near(r.accuracy, hits / 4, 1e-6, tostring(tail))
  end
  -- A subclass's call may do more than move values: its output is logits, as any other.
  local Doubled = nn.Flatten:extend("Doubled")
  function Doubled:call(v, ctx) return nn.Flatten.call(self, v, ctx) * 2 end
  local m = nn.Sequential {nn.Dense(1, {activation = "sigmoid"}), Doubled()}
  m:compile {optimizer = "sgd", loss = "binary_crossentropy"}
  m(x)
  m:set_parameters(lin:parameters())
  local p2 = lin(x):sigmoid() * 2
  check.near(m:evaluate(x, yb, {verbose = 0}).loss,
    losses.binary_crossentropy(yb, p2, {from_logits = true}):item(), 1e-5, "subclass")
  -- a softmax over 5 channels of a 4x4 image, reshaped to 16 rows of 5 (and cropped first)
  local img = tpu.random.normal(tpu.random.key(3), {2, 4, 4, 3})
  local labels = tpu.tensor({{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0},
                             {4, 3, 2, 1, 0, 4, 3, 2, 1, 0, 4, 3, 2, 1, 0, 4}}, {dtype = "i32"})
  local conv = nn.Sequential {nn.Conv2D(5, 1)}
  local logits = conv(img)
  for _, layers in ipairs {{nn.Reshape {16, 5}}, {nn.Cropping2D {cropping = {{1, 0}, {0, 0}}}, nn.Reshape {12, 5}}} do
    local m = nn.Sequential {nn.Conv2D(5, 1), nn.Activation("softmax"), table.unpack(layers)}
    m:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}
    m(img)
    m:set_parameters(conv:parameters())
    local zl, yl = logits:reshape {2, 16, 5}, labels
    if #layers == 2 then zl, yl = logits:slice {{1, 2}, {2, 4}}:reshape {2, 12, 5}, labels:slice {{1, 2}, {5, 16}} end
    check.near(m:evaluate(img, yl, {verbose = 0}).loss,
      losses.sparse_categorical_crossentropy(yl, zl, {from_logits = true}):item(), 1e-5, #layers)
  end
end

-- Flatten of [batch, 2, 5] softmax rows is not a softmax over 10: it is read as probabilities
-- (divided by their sum, 2, as Keras does), not through logits. Dropout in training scales
-- its input's probabilities: read as probabilities too.
function T.probabilities_without_logits_after_a_regrouping_or_dropout()
  local nn = tpu.nn
  local x = tpu.tensor {{{1, 2, 3, 4, 5}, {0, 0, 0, 0, 1}}}
  local m = nn.Sequential {nn.Activation("softmax"), nn.Flatten()}
  local p = m(x)
  local label = tpu.tensor({3}, {dtype = "i32"})
  local by_name = losses.per_example("sparse_categorical_crossentropy")
  check.near(by_name(label, p):item(), -math.log(p:totable()[1][4] / 2), 1e-5)
  local s = nn.Activation("sigmoid")(tpu.tensor {{0.3}, {-2}})
  local d = nn.Dropout(0.5)(s, {training = true, key = tpu.random.key(7)})
  local function clip(v) return math.max(math.min(v, 1 - 1e-7), 1e-7) end
  local dv = d:totable()  -- kept values doubled, dropped ones 0
  check.near(losses.per_example("binary_crossentropy")(tpu.tensor {{1}, {0}}, d):totable(),
    {-math.log(clip(dv[1][1])), -math.log(1 - clip(dv[2][1]))}, 1e-4)
end

-- Keras's mae, huber (delta 1), kl_divergence (both clipped to [1e-7, 1]) and label_smoothing;
-- the values are numpy's (float64) of the same formulas.
function T.keras_regression_and_divergence_losses()
  local yt = tpu.tensor {{0.0, 1.0, 0.0}, {0.2, 0.3, 0.5}}
  local yp = tpu.tensor {{0.1, 2.5, -0.4}, {0.25, 0.05, 0.7}}
  check.near(losses.mae(yt, yp):item(), 0.41666667, 1e-6)
  check.is_true(losses.mean_absolute_error == losses.mae and losses.kld == losses.kl_divergence)
  check.near(losses.huber(yt, yp):item(), 0.18958333, 1e-6)
  local pp = tpu.tensor {{0.1, 0.7, 0.2}, {0.6, 0.0, 0.4}}
  check.near(losses.kl_divergence(yt, pp):item(), 2.36137914, 1e-5)
  for _, name in ipairs {"mae", "mean_absolute_error", "huber", "kl_divergence", "kld"} do
    local m = tpu.nn.Sequential {tpu.nn.Dense(3)}
    m:compile {optimizer = "sgd", loss = name}
    local x = tpu.tensor {{1, 2}, {3, 4}}
    local p = m(x)
    check.near(m:evaluate(x, yt, {verbose = 0}).loss, losses[name](yt, p):item(), 1e-5, name)
  end
  check.raises(function() losses.huber(yt, yp, {from_logits = true}) end, "huber: unknown option 'from_logits'")
end

-- nn.Softmax over another axis than the last gives probabilities, which a loss by name reads
-- as such (normalized over the last axis, as a direct call with from_logits = false does).
function T.a_softmax_over_another_axis_is_read_as_probabilities()
  local nn = tpu.nn
  local x = tpu.tensor {{1, 2}, {-1, 0.5}}
  local yt = tpu.tensor {{{1, 0, 0}, {0, 0, 1}}, {{0, 1, 0}, {1, 0, 0}}}
  local m = nn.Sequential {nn.Dense(6), nn.Reshape {2, 3}, nn.Softmax(2)}
  m:compile {optimizer = "sgd", loss = "categorical_crossentropy"}
  check.near(m:evaluate(x, yt, {verbose = 0}).loss, losses.categorical_crossentropy(yt, m(x)):item(), 1e-5)
end

-- Keras's Huber(delta): e^2 / 2 up to delta, delta (e - delta / 2) beyond (numpy references).
function T.huber_delta_and_the_huber_class()
  local yt = tpu.tensor {{0.0, 1.0, 0.0}, {0.2, 0.3, 0.5}}
  local yp = tpu.tensor {{0.1, 2.5, -0.4}, {0.25, 0.05, 0.7}}
  check.near(losses.huber(yt, yp, {delta = 0.2}):item(), 0.06604167, 1e-6)
  check.near(losses.huber(yt, yp, {delta = 3}):item(), 0.21041667, 1e-6)
  local h = losses.Huber {delta = 0.2}
  check.eq(tostring(h), "Huber{delta = 0.2}")
  check.near(h(yt, yp):item(), 0.06604167, 1e-6)
  local m = tpu.nn.Sequential {tpu.nn.Dense(3)}
  m:compile {optimizer = "sgd", loss = h}
  local x = tpu.tensor {{1, 2}, {3, 4}}
  check.near(m:evaluate(x, yt, {verbose = 0}).loss, losses.huber(yt, m(x), {delta = 0.2}):item(), 1e-5)
  check.raises(function() losses.Huber {delta = 0} end, "Huber: delta must be a positive number, got 0")
  check.raises(function() losses.huber(yt, yp, {delta = "x"}) end, 'huber: delta must be a positive number, got "x"')
end

function T.label_smoothing()
  local yt, pp = tpu.tensor {{0, 1, 0}, {0.2, 0.3, 0.5}}, tpu.tensor {{0.1, 0.7, 0.2}, {0.6, 0.0, 0.4}}
  check.near(losses.categorical_crossentropy(yt, pp, {label_smoothing = 0.2}):item(), 3.02809598, 1e-5)
  local z = tpu.tensor {{0.1, 2.5, -0.4}, {0.25, 0.05, 0.7}}
  check.near(losses.CategoricalCrossentropy {label_smoothing = 0.2, from_logits = true}(yt, z):item(), 0.78033783, 1e-5)
  local bt = tpu.tensor {{1}, {0}, {1}}
  check.near(losses.binary_crossentropy(bt, tpu.tensor {{0.9}, {0.3}, {0.4}}, {label_smoothing = 0.1}):item(), 0.50342635, 1e-5)
  local bce = losses.BinaryCrossentropy {label_smoothing = 0.1, from_logits = true}
  check.near(bce(bt, tpu.tensor {{2.0}, {-1.0}, {0.5}}):item(), 0.36308889, 1e-5)
  check.eq(tostring(bce), "BinaryCrossentropy{from_logits = true, label_smoothing = 0.1}")
  check.raises(function() losses.BinaryCrossentropy {label_smoothing = 2} end,
    "BinaryCrossentropy: label_smoothing must be a number from 0 to 1, got 2")
  check.raises(function() losses.SparseCategoricalCrossentropy {label_smoothing = 0.1} end,
    "unknown option 'label_smoothing'")
end

-- binary_accuracy reads each unit as "accuracy" reads one; categorical_accuracy compares
-- argmaxes. Values are numpy's.
function T.binary_and_categorical_accuracy()
  local y = tpu.tensor {{1, 0, 1}, {0, 0, 1}}
  local z = tpu.tensor {{0.3, -1.2, -0.1}, {2.0, -0.5, 0.7}}
  check.near(metrics.binary_accuracy(y, z):item(), 4 / 6, 1e-6)  -- logits above 0
  check.near(metrics.binary_accuracy(y, tpu.nn.Activation("sigmoid")(z)):item(), 4 / 6, 1e-6)
  check.near(metrics.binary_accuracy(y, z:sigmoid()):item(), 3 / 6, 1e-6)  -- no record: read as logits, all above 0
  local oh = tpu.tensor {{0, 1, 0}, {0, 0, 1}, {1, 0, 0}}
  local sc = tpu.tensor {{0.1, 0.7, 0.2}, {0.5, 0.3, 0.2}, {0.9, 0.05, 0.05}}
  check.near(metrics.categorical_accuracy(oh, sc):item(), 2 / 3, 1e-6)
  check.eq(metrics.get("binary_accuracy"), metrics.binary_accuracy)
  check.eq(metrics.get("categorical_accuracy"), metrics.categorical_accuracy)
  check.raises(function() metrics.categorical_accuracy(tpu.tensor({1, 2, 0}, {dtype = "i32"}), sc) end,
    "categorical_accuracy: labels i32[3] do not match predictions f32[3,3]")
end

function T.a_loss_object_shows_the_options_its_class_takes()
  check.eq(tostring(losses.MeanSquaredError()), "MeanSquaredError{}")
  check.eq(tostring(losses.BinaryCrossentropy {from_logits = true}), "BinaryCrossentropy{from_logits = true}")
  check.eq(tostring(losses.SparseCategoricalCrossentropy {ignore_class = 0}),
    "SparseCategoricalCrossentropy{from_logits = false, ignore_class = 0}")
end

function T.loss_objects_take_from_logits()
  local y = tpu.tensor({2, 0}, {dtype = "i32"})
  local z = tpu.tensor(logits)
  check.near(losses.SparseCategoricalCrossentropy {from_logits = true}(y, z):item(), expected, 1e-5)
  local p = z:softmax()  -- not an activation's output: read as probabilities
  check.near(losses.SparseCategoricalCrossentropy {}(y, p):item(), expected, 1e-5)
  check.near(losses.SparseCategoricalCrossentropy()(y, p):item(), expected, 1e-5)
  local onehot = tpu.tensor {{0, 0, 1}, {1, 0, 0}}
  check.near(losses.CategoricalCrossentropy {from_logits = true}(onehot, z):item(), expected, 1e-5)
  check.near(losses.CategoricalCrossentropy {}(onehot, p):item(), expected, 1e-5)
  local t, q = tpu.tensor {{1}, {0}}, tpu.tensor {{0.8}, {0.4}}
  local bce = -(math.log(0.8) + math.log(0.6)) / 2
  check.near(losses.BinaryCrossentropy {}(t, q):item(), bce, 1e-5)
  local lq = tpu.tensor {{math.log(4)}, {math.log(0.4 / 0.6)}}  -- logits of 0.8 and 0.4
  check.near(losses.BinaryCrossentropy {from_logits = true}(t, lq):item(), bce, 1e-5)
  check.near(losses.MeanSquaredError {}(tpu.tensor {1, 2}, tpu.tensor {2, 4}):item(), 2.5, 1e-6)
  -- in compile, an object keeps its from_logits: false reads a linear output as probabilities
  local x = tpu.tensor {{0.2, 0.3}, {0.1, 0.4}}
  local model = tpu.nn.Sequential {tpu.nn.Dense(2)}
  model:compile {optimizer = "sgd", loss = losses.SparseCategoricalCrossentropy {from_logits = false}}
  local out = model(x)
  local yy = tpu.tensor({1, 0}, {dtype = "i32"})
  local ds = tpu.data.from_tensors {x, yy}:batch(2)
  check.near(model:evaluate(ds, {verbose = 0}).loss,
    losses.sparse_categorical_crossentropy(yy, out, {from_logits = false}):item(), 1e-5)
  check.raises(function() losses.SparseCategoricalCrossentropy {from_logit = true} end,
    "test_losses.lua:%d+: SparseCategoricalCrossentropy: unknown option 'from_logit'; did you mean 'from_logits'%? %(known options: from_logits, ignore_class%)")
  check.raises(function() losses.BinaryCrossentropy {from_logits = 1} end,
    "BinaryCrossentropy: from_logits must be true or false, got 1")
  check.raises(function() losses.MeanSquaredError {from_logits = true} end, "MeanSquaredError: unknown option 'from_logits'")
end

---------------------------------------------------------------- ignore_class, perplexity

-- [2, 3] labels (0 = padding) and [2, 3, 4] logits; the kept tokens are (1,1)=1, (1,2)=2,
-- (2,1)=2: the loss is the mean of their three cross-entropies.
local tok_y = tpu.tensor({{1, 2, 0}, {2, 0, 0}}, {dtype = "i32"})
local tok_z = tpu.random.normal(tpu.random.key(1), {2, 3, 4})

local function kept_mean(y, z, ignore)
  local lp, yt, sum, n = z:log_softmax(-1):totable(), y:totable(), 0, 0
  for b, row in ipairs(yt) do
    for t, label in ipairs(row) do
      if label ~= ignore then sum, n = sum - lp[b][t][label + 1], n + 1 end
    end
  end
  return sum / n
end

function T.ignore_class_is_the_mean_over_the_other_tokens()
  local want = kept_mean(tok_y, tok_z, 0)
  local opts = {from_logits = true, ignore_class = 0}
  check.near(losses.sparse_categorical_crossentropy(tok_y, tok_z, opts):item(), want, 1e-5)
  local loss = losses.SparseCategoricalCrossentropy(opts)
  check.near(loss(tok_y, tok_z):item(), want, 1e-5)
  check.eq(tostring(loss), "SparseCategoricalCrossentropy{from_logits = true, ignore_class = 0}")
  -- without ignore_class the padding positions count, a different (per-row) mean
  local all = losses.sparse_categorical_crossentropy(tok_y, tok_z, {from_logits = true}):item()
  check.is_true(math.abs(all - want) > 1e-3)
end

function T.ignore_class_gradient_matches_finite_differences()
  local loss = losses.SparseCategoricalCrossentropy {from_logits = true, ignore_class = 0}
  local err = jacobian.max_error(function(z) return loss(tok_y, z):reshape({1}) end, tok_z)
  check.near(err, 0, 2e-3)
  -- an ignored position gets no gradient
  local g = tpu.grad(function(z) return loss(tok_y, z) end)(tok_z):totable()
  check.eq(g[2][3], {0, 0, 0, 0})
end

-- A token model: [batch, 3] ids -> [batch, 3, 4] logits.
local function token_model(loss, metric_list)
  tpu.nn.set_seed(3)
  local model = tpu.nn.Sequential {tpu.nn.Embedding(6, 5), tpu.nn.Dense(4)}
  model:compile {optimizer = "sgd", loss = loss, metrics = metric_list}
  return model
end

function T.ignore_class_in_fit_counts_real_rows_only()
  -- label 3 is the padding id: evaluate pads the last batch (1 row) with a zero row whose
  -- labels (0) would count if the examples' weights did not reach the loss
  local x = tpu.tensor({{1, 2, 3}, {4, 5, 0}, {2, 2, 1}}, {dtype = "i32"})
  local y = tpu.tensor({{1, 3, 3}, {2, 0, 3}, {0, 3, 3}}, {dtype = "i32"})
  local model = token_model(losses.SparseCategoricalCrossentropy {from_logits = true,
                                                                  ignore_class = 3})
  local z = model(x)
  local first = kept_mean(y:slice {{1, 2}}, z:slice {{1, 2}}, 3)
  local last = kept_mean(y:slice {{3, 3}}, z:slice {{3, 3}}, 3)
  local ds = tpu.data.from_tensors {x, y}:batch(2)
  check.near(model:evaluate(ds, {verbose = 0}).loss, (2 * first + last) / 3, 1e-5)
end

function T.perplexity_is_exp_of_the_mean_kept_token_loss()
  local m = metrics.Perplexity {from_logits = true, mask_token_id = 0}
  check.near(m(tok_y, tok_z):item(), math.exp(kept_mean(tok_y, tok_z, 0)), 1e-3)
  check.near(metrics.get("perplexity")(tok_y, tok_z):item(), math.exp(kept_mean(tok_y, tok_z)),
    1e-3)
  -- in compile: exp of the mean over the data set's kept tokens, whatever the batching
  local x = tpu.tensor({{1, 2, 3}, {4, 5, 0}, {2, 2, 1}}, {dtype = "i32"})
  local y = tpu.tensor({{1, 0, 0}, {2, 1, 3}, {0, 1, 2}}, {dtype = "i32"})
  -- (the last batch is padded with a row of weight 0: it counts for neither)
  local masked = metrics.Perplexity {from_logits = true, mask_token_id = 0, name = "masked"}
  local model = token_model("sparse_categorical_crossentropy", {masked, "perplexity"})
  local want, all = math.exp(kept_mean(y, model(x), 0)), math.exp(kept_mean(y, model(x)))
  local logs = model:evaluate(tpu.data.from_tensors {x, y}:batch(2), {verbose = 0})
  check.near(logs.masked, want, 1e-3 * want)
  check.near(logs.perplexity, all, 1e-3 * all)
end

function T.ignore_class_and_perplexity_options_are_checked()
  check.raises(function() losses.SparseCategoricalCrossentropy {ignore_class = 0.5} end,
    "SparseCategoricalCrossentropy: ignore_class must be an integer class id %(e.g. 0, the "
    .. "padding id%), got 0.5")
  check.raises(function() losses.CategoricalCrossentropy {ignore_class = 0} end,
    "CategoricalCrossentropy: unknown option 'ignore_class'")
  check.raises(function() metrics.Perplexity {mask_token_id = "pad"} end,
    "Perplexity: mask_token_id must be an integer token id")
  check.raises(function() metrics.Perplexity {from_logits = 1} end,
    "Perplexity: from_logits must be true or false, got 1")
  check.raises(function() metrics.Perplexity {mask_id = 0} end,
    "Perplexity: unknown option 'mask_id'")
end

-- A masked (-inf) logit of another class is a probability of 0, not a NaN: the label's score
-- is selected, never multiplied by a one-hot (-inf * 0).
function T.minus_inf_logit_of_another_class()
  local labels = tpu.tensor({0}, {dtype = "i32"})
  local z = tpu.tensor {{1.0, -math.huge, 3.0}}
  local want = math.log(math.exp(1) + math.exp(3)) - 1
  check.near(losses.sparse_categorical_crossentropy(labels, z, {from_logits = true}):item(), want, 1e-5)
  check.near(metrics.Perplexity {from_logits = true}(labels, z):item(), math.exp(want), 1e-3)
  check.near(metrics.top_k_accuracy {k = 1}(labels, z):item(), 0, 0)
  check.near(metrics.top_k_accuracy {k = 2}(labels, z):item(), 1, 0)
  local g = tpu.jit(tpu.grad(function(v)
    return losses.sparse_categorical_crossentropy(labels, v, {from_logits = true})
  end))(z):totable()
  local e = math.exp(1) + math.exp(3)
  check.near(g[1], {math.exp(1) / e - 1, 0, math.exp(3) / e}, 1e-5)
end

-- Loss objects take Keras's third argument, sample_weight: sum(w * loss) / examples (Keras's
-- "sum_over_batch_size"); with ignore_class, over the positions kept.
function T.loss_objects_take_sample_weight()
  local y, z = tpu.tensor {{1, 0}, {0, 1}}, tpu.tensor {{1.5, -0.3}, {-2.0, 0.7}}
  local bce = losses.BinaryCrossentropy {from_logits = true}
  local rows = losses.per_example(bce)(y, z):totable()
  check.near(bce(y, z, tpu.tensor {1, 0}):item(), rows[1] / 2, 1e-6)
  check.near(bce(y, z, tpu.tensor {{2}, {0.5}}):item(), (2 * rows[1] + 0.5 * rows[2]) / 2, 1e-6)
  check.near(bce(y, z, 3):item(), 3 * (rows[1] + rows[2]) / 2, 1e-5)
  local lbl = tpu.tensor({{1, 0, 2}, {0, 0, 1}}, {dtype = "i32"})
  local lg = tpu.tensor {{{1, 2, 0.5}, {0.3, 0.1, -1}, {2, 2, 2}}, {{0, 1, 0}, {1, 0, 0}, {0.5, -0.5, 1}}}
  local scce = losses.SparseCategoricalCrossentropy {from_logits = true, ignore_class = 0}
  check.near(scce(lbl, lg, tpu.tensor {2, 0.5}):item(), 1.3926758, 1e-5, "Keras's value")
  check.raises(function() return (losses.MeanSquaredError()(y, z, tpu.tensor {1, 2, 3})) end,
    "test_losses.lua:%d+: MeanSquaredError: sample_weight f32%[3%] does not match the 2 examples")
  check.raises(function() return bce(y, z, "w") end, "bad argument #3 to 'BinaryCrossentropy' %(number or tensor expected, got string%)")
  check.raises(function() return bce(y, z, 1, 2) end, "bad argument #4 to 'BinaryCrossentropy' %(no value expected")
end

return T
