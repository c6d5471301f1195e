-- Tests of functional models: nn.Input, layers called on symbolic tensors, nn.Model with several
-- inputs and outputs, shared layers, nesting, training, and the errors of each.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn, data, optim = tpu.nn, tpu.data, tpu.optim
local rand = nn_check.rand

local T = {}

-- a (8) -> dense 4 relu; concat with b (3) -> dense 2
local function two_input_model()
  local a, b = nn.Input {shape = {8}, name = "a"}, nn.Input {shape = {3}, name = "b"}
  local h = nn.Dense(4, {activation = "relu"})(a)
  local y = nn.Dense(2)(nn.Concatenate()({h, b}))
  return nn.Model {inputs = {a, b}, outputs = y}, a, b
end

function T.two_inputs_compute_the_composition()
  local model = two_input_model()
  local xa, xb = rand({5, 8}, 1), rand({5, 3}, 2)
  local d1, cat, d2 = table.unpack(model.modules)
  check.eq(cat.__name, "Concatenate")
  local expected = d2(tpu.concat({d1(xa), xb}, 2))
  check.near(model({xa, xb}):totable(), expected:totable(), 1e-6)
  check.eq(#model:parameters(), 4)
  check.eq(model:count_params(), 8 * 4 + 4 + 7 * 2 + 2)
end

function T.symbolic_shapes_and_dtypes()
  local a = nn.Input {shape = {28, 28}}
  check.eq(a.shape, {-1, 28, 28})
  check.eq(a.dtype, "f32")
  local f = nn.Flatten()(a)
  check.eq(f.shape, {-1, 784})
  local ids = nn.Input {shape = {-1}, dtype = "i32"}
  local e = nn.Embedding(10, 4)(ids)
  check.eq(e.shape, {-1, -1, 4})
  check.eq(e.dtype, "f32")
  check.eq(tostring(e):match("^symbolic f32%(None, None, 4%)") ~= nil, true)
end

function T.variable_length_input_runs_on_any_length()
  local ids = nn.Input {shape = {-1}, dtype = "i32"}
  local y = nn.Dense(1)(nn.GlobalAvgPool2D {keepdims = false}(nn.Reshape {1, -1, 4}(nn.Embedding(10, 4)(ids))))
  local model = nn.Model {inputs = ids, outputs = y}
  check.eq(model(tpu.zeros({2, 3}, {dtype = "i32"})).shape, {2, 1})
  check.eq(model(tpu.zeros({5, 7}, {dtype = "i32"})).shape, {5, 1})
end

function T.several_outputs_and_fit()
  nn.set_seed(3)
  local x = nn.Input {shape = {4}}
  local h = nn.Dense(8, {activation = "tanh"})(x)
  local class = nn.Dense(3, {name = "class"})(h)
  local value = nn.Dense(1, {name = "value"})(h)
  local model = nn.Model {inputs = x, outputs = {class, value}}
  local xs = rand({32, 4}, 5)
  local out = model(xs)
  check.eq(#out, 2)
  check.eq(out[1].shape, {32, 3})
  check.eq(out[2].shape, {32, 1})
  local labels = xs:argmax(-1):minimum(2)
  local targets = xs:sum(-1, true)
  model:compile {optimizer = optim.Adam {lr = 0.05}, loss = {"sparse_categorical_crossentropy", "mse"},
                 loss_weights = {1, 0.5}, metrics = {{"accuracy"}, {"mse"}}}
  local train = data.from_tensors {xs, {labels, targets}}:batch(8)
  local h1 = model:fit(train, {epochs = 4, verbose = 0})
  check.eq(#h1.history.class_accuracy, 4)
  check.eq(#h1.history.value_mse, 4)
  check.is_true(h1.history.loss[4] < h1.history.loss[1], "loss decreases")
  local r = model:evaluate(train, {verbose = 0})
  check.is_true(r.value_mse ~= nil and r.class_accuracy ~= nil)
  local manual = tpu.losses.sparse_categorical_crossentropy(labels, model(xs)[1], {from_logits = true}):item()
                 + 0.5 * tpu.losses.mse(targets, model(xs)[2]):item()
  check.near(r.loss, manual, 1e-4)
  local p = model:predict(train)
  check.eq({p[1].shape, p[2].shape}, {{32, 3}, {32, 1}})
  check.raises(function() model:compile {optimizer = "adam", loss = {"mse"}} end,
    "compile: 1 losses for a model with 2 outputs")
end

-- Keras 3's compile on several outputs: loss, loss_weights and metrics keyed by output name (the
-- output layers' names); a flat list of metrics has one entry per output.
local function class_value_model()
  nn.set_seed(3)
  local x = nn.Input {shape = {4}}
  local h = nn.Dense(8, {activation = "tanh"})(x)
  local model = nn.Model {inputs = x, outputs = {nn.Dense(3, {name = "class"})(h), nn.Dense(1, {name = "value"})(h)}}
  local xs = rand({16, 4}, 5)
  return model, xs, {xs:argmax(-1):minimum(2), xs:sum(-1, true)}
end

local function logged(r)
  local keys = {}
  for k in pairs(r) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

function T.compile_by_output_name()
  local model, xs, ys = class_value_model()
  model:compile {optimizer = "sgd", loss = {"sparse_categorical_crossentropy", "mse"}, loss_weights = {1, 0.5}}
  local by_list = model:evaluate(xs, ys, {verbose = 0}).loss
  model:compile {optimizer = "sgd", loss = {value = "mse", class = "sparse_categorical_crossentropy"},
                 loss_weights = {value = 0.5, class = 1}, metrics = {class = "accuracy"}}
  local r = model:evaluate(xs, ys, {verbose = 0})
  check.eq(r.loss, by_list)
  check.eq(logged(r), {"class_accuracy", "loss"})
  model:compile {optimizer = "sgd", loss = {"sparse_categorical_crossentropy", "mse"},
                 metrics = {class = {"accuracy", "top_k_accuracy"}, value = "mse"}}
  check.eq(logged(model:evaluate(xs, ys, {verbose = 0})),
    {"class_accuracy", "class_top_k_accuracy", "loss", "value_mse"})
  -- a flat list: one entry per output, as Keras 3 (not every metric on every output)
  model:compile {optimizer = "sgd", loss = {"sparse_categorical_crossentropy", "mse"}, metrics = {"accuracy", "mse"}}
  check.eq(logged(model:evaluate(xs, ys, {verbose = 0})), {"class_accuracy", "loss", "value_mse"})
  check.raises(function() model:compile {optimizer = "sgd", loss = "mse", metrics = {"accuracy"}} end,
    "compile: for a model with 2 outputs, metrics has one entry per output (a metric or a list of them), "
    .. "or is keyed by output name")
  check.raises(function() model:compile {optimizer = "sgd", loss = "mse", metrics = {cls = "accuracy"}} end,
    "compile: metrics has the key \"cls\", which is not the name of an output of the model (its outputs: class, value)")
  check.raises(function() model:compile {optimizer = "sgd", loss = {class = "mse"}} end,
    "compile: loss has no entry for the output 'value' (expected the keys class, value)")
  check.raises(function()
    model:compile {optimizer = "sgd", loss = "mse", loss_weights = {class = 1, valeu = 2}}
  end, "compile: loss_weights has the key \"valeu\"")
end

-- validation_split cuts every tensor of lists of inputs and outputs, as validation_data of the
-- last rows would.
function T.validation_split_of_lists()
  local function run(split)
    nn.set_seed(4)
    local a, b = nn.Input {shape = {3}}, nn.Input {shape = {2}}
    local h = nn.Dense(4, {activation = "tanh"})(nn.Concatenate()({a, b}))
    local model = nn.Model {inputs = {a, b}, outputs = {nn.Dense(3, {name = "c"})(h), nn.Dense(1, {name = "r"})(h)}}
    model:compile {optimizer = "sgd", loss = {"sparse_categorical_crossentropy", "mse"}}
    local xa, xb = rand({10, 3}, 1), rand({10, 2}, 2)
    local yc, yr = xa:argmax(-1), xb:sum(-1, true)
    local head = function(t) return t:slice {{1, 8}} end
    local tail = function(t) return t:slice {{9, 10}} end
    local h1
    if split then
      h1 = model:fit({xa, xb}, {yc, yr}, {epochs = 2, batch_size = 4, verbose = 0, validation_split = 0.2})
    else
      h1 = model:fit({head(xa), head(xb)}, {head(yc), head(yr)}, {epochs = 2, batch_size = 4, verbose = 0,
        validation_data = {{tail(xa), tail(xb)}, {tail(yc), tail(yr)}}})
    end
    return h1.history, model:parameters()[1]:totable()
  end
  local h1, w1 = run(true)
  local h2, w2 = run(false)
  check.eq(#h1.val_loss, 2)
  check.eq(h1, h2)
  check.eq(w1, w2)
end

function T.one_target_for_two_outputs_shows_the_call()
  local model, xs, ys = class_value_model()
  model:compile {optimizer = "sgd", loss = {"sparse_categorical_crossentropy", "mse"}}
  check.raises(function() model:fit(xs, ys[2], {verbose = 0}) end,
    "give one target per output: model:fit(x, {y1, y2})")
end

function T.shared_layer_has_one_set_of_weights()
  local shared = nn.Dense(3)
  local a, b = nn.Input {shape = {2}}, nn.Input {shape = {2}}
  local y = nn.Add()({shared(a), shared(b)})
  local model = nn.Model {inputs = {a, b}, outputs = y}
  check.eq(#model.modules, 2)
  check.eq(model:count_params(), 9)
  local xa, xb = rand({1, 2}, 1), rand({1, 2}, 2)
  check.near(model({xa, xb}):totable(), (shared(xa) + shared(xb)):totable(), 1e-6)
  local text = tostring(model)
  check.is_true(text:find("dense_%d+_2 = nn.Dense%(2 %-> 3%)%(input_%d+%)") ~= nil, text)
end

function T.nesting_both_ways()
  local inner = two_input_model()
  local a, b = nn.Input {shape = {8}}, nn.Input {shape = {3}}
  local outer = nn.Model {inputs = {a, b}, outputs = nn.Activation("softmax")(inner {a, b})}
  check.near(outer({rand({2, 8}), rand({2, 3})}):sum(-1):totable(), {1, 1}, 1e-6)
  check.eq(#outer:parameters(), 4)
  local x = nn.Input {shape = {6}}
  local fm = nn.Model {inputs = x, outputs = nn.Dense(2)(x)}
  local seq = nn.Sequential {fm, nn.Dense(1)}
  check.eq(seq(rand({3, 6})).shape, {3, 1})
  seq:build({4, 6})
  check.eq(#seq:parameters(), 4)
end

function T.gradients_through_the_graph()
  local model = two_input_model()
  nn_check.gradients(model, {rand({2, 8}, 7), rand({2, 3}, 8)})
end

function T.fit_two_inputs()
  nn.set_seed(1)
  local model = two_input_model()
  local xa, xb = rand({24, 8}, 3), rand({24, 3}, 4)
  local y = (xa:sum(-1) + xb:sum(-1)):gt(0):cast("i32")
  model:compile {optimizer = optim.Adam {lr = 0.05}, loss = "sparse_categorical_crossentropy",
                 metrics = {"accuracy"}}
  local h = model:fit(data.from_tensors {{xa, xb}, y}:batch(8), {epochs = 5, verbose = 0})
  check.is_true(h.history.loss[5] < h.history.loss[1])
  check.eq(model:predict(data.from_tensors {{xa, xb}}:batch(10)).shape, {24, 2})
end

function T.model_errors()
  local a, b = nn.Input {shape = {2}, name = "in_a"}, nn.Input {shape = {2}, name = "in_b"}
  local y = nn.Add()({a, b})
  check.raises(function() nn.Model {inputs = a, outputs = y} end,
    "Model: output 'add_%d+' depends on input 'in_b', which is not in inputs")
  local h = nn.Dense(2)(a)
  check.raises(function() nn.Model {inputs = {h}, outputs = y} end,
    "Model: inputs%[1%] %('dense_%d+'%) is not an nn.Input but the output of Dense 'dense_%d+'")
  check.raises(function() nn.Model {inputs = {a, a, b}, outputs = y} end, "Model: input 'in_a' is listed twice")
  check.raises(function() nn.Model {inputs = {a, b}, outputs = rand({2})} end,
    "Model: outputs must be a symbolic tensor (from nn.Input or a layer called on one) or a list of them, got a tensor f32[2]")
  check.raises(function() nn.Model {inputs = {a, b}, output = y} end, "Model: unknown option 'output'")
  local m = nn.Model {inputs = {a, b}, outputs = y}
  check.raises(function() m(rand({1, 2})) end, "Model 'model_%d+' expects a list of 2 tensors %(one per input%), got a tensor f32%[1,2%]")
  check.raises(function() m {rand({1, 2}), rand({1, 3})} end, "Model 'model_%d+' expects input 'in_b' of shape %(None, 2%), got f32%[1,3%]")
end

function T.symbolic_tensor_errors()
  local a = nn.Input {shape = {2}}
  check.raises(function() return a + a end, "arithmetic on a symbolic tensor (from nn.Input): a functional model is made of layers")
  check.raises(function() return a:relu() end, "the tensor method 'relu' on a symbolic tensor")
  check.raises(function() nn.Dense(2)(a, {key = tpu.random.key(1)}) end,
    "called on symbolic tensors with a second argument other than {training = false}, got {key=.*}: keys are chosen when the model runs")
  -- {training = true} would leave a model whose Dropout needs a key in predict and evaluate.
  check.raises(function() nn.Dropout(0.5, {name = "drop_forced"})(a, {training = true}) end,
    "Dropout 'drop_forced' called on symbolic tensors with {training = true}: only {training = false} is recorded")
  local y = nn.Dropout(0.5)(a, {training = false})
  local m = nn.Model {inputs = a, outputs = y}
  check.eq(m:predict(tpu.ones {2, 2}):totable(), {{1, 1}, {1, 1}})
  check.raises(function() nn.Input {shape = 3} end,
    "Input: shape must be a list of sizes without the batch dimension (-1 for a size known only at run time), e.g. {28, 28, 1}; got 3")
  check.raises(function() nn.Input {shape = {0}} end, "got {0}")
  check.raises(function() nn.Input {shape = {2}, dtype = "f64"} end, 'Input: dtype must be one of f32, bf16, i32, u8, bool; got "f64"')
  check.raises(function() nn.Input {size = {2}} end, "Input: unknown option 'size'")
end

-- Keras's layer.output / layer.input (those of the first symbolic call), model.input,
-- model.output and model:get_layer(name): a model of an intermediate output.
function T.layer_output_and_get_layer()
  local a = nn.Input {shape = {4}, name = "feat_in"}
  local hidden = nn.Dense(3, {name = "feat_hidden"})
  local h = hidden(a)
  local out = nn.Dense(1)(h)
  local m = nn.Model {inputs = a, outputs = out}
  check.is_true(hidden.output == h and hidden.input == a)
  check.is_true(m.input == a and m.output == out)
  check.is_true(m:get_layer("feat_hidden") == hidden)
  local both = nn.Model {inputs = m.input, outputs = {m:get_layer("feat_hidden").output, m.output}}
  check.eq(both:count_params(), 19)
  check.eq(#both(rand({2, 4})), 2)
  check.raises(function() m:get_layer("feat_hiden") end,
    "Model 'model_%d+' has no layer named 'feat_hiden'; did you mean 'feat_hidden'%? %(its layers: feat_hidden, dense_%d+%)")
  local s = nn.Sequential {nn.Dense(2, {name = "seq_first"})}
  check.is_true(s:get_layer("seq_first") == s.layers[1])
  -- A hole in a list (a field that does not exist, as `output` before a symbolic call) is an
  -- error naming its position, not a shorter list.
  local unused = nn.Dense(2)
  check.eq(unused.output, nil)
  check.raises(function() nn.Model {inputs = a, outputs = {unused.output, h}} end,
    "Model: outputs%[1%] is nil, not a symbolic tensor %(a layer's `output` is the symbolic tensor of its first call on symbolic tensors, nil before one%)")
  check.raises(function() nn.Model {inputs = {nil, a}, outputs = h} end, "Model: inputs%[1%] is nil")
  check.raises(function() nn.Model {inputs = a, outputs = {h, extra = out}} end,
    'Model: outputs must be a list of symbolic tensors, got the key "extra"')
end

-- Keras's transfer-learning idiom: base(x, {training = false}) keeps the base in inference mode
-- in fit even when trainable: BatchNorm uses and keeps its moving statistics, Dropout is off,
-- and the base's weights still train.
function T.call_with_training_false_runs_in_inference_mode()
  local inner = nn.Input {shape = {3}}
  local bn = nn.BatchNorm()
  local base_dense = nn.Dense(4)
  local base = nn.Model {inputs = inner, outputs = nn.Dropout(0.9)(bn(base_dense(inner)))}
  local a = nn.Input {shape = {3}}
  local out = nn.Dense(1)(base(a, {training = false}))
  local model = nn.Model {inputs = a, outputs = out}
  local x = rand({16, 3}) * 3 + 2
  local y = x:sum(2, true)
  local kernel_before = base_dense.kernel:totable()
  model:compile {optimizer = "sgd", loss = "mse"}
  model:fit(x, y, {epochs = 2, batch_size = 8, verbose = 0})
  check.eq(bn.moving_mean:totable(), {0, 0, 0, 0})
  check.eq(bn.moving_variance:totable(), {1, 1, 1, 1})
  check.is_true(not pcall(check.near, base_dense.kernel:totable(), kernel_before, 1e-6), "the base trains")
  -- training mode but no dropout in that call: two training calls agree
  local ctx = function() return {training = true, key = tpu.random.key(3)} end
  check.near(model(x, ctx()):totable(), model(x, ctx()):totable(), 1e-6)
  check.near(model(x, ctx()):totable(), model(x):totable(), 1e-5)
end

return T
