-- The models of the export test (run.py): each is exported to DIR/<name>.onnx, and its
-- random input and model:predict's output are saved to DIR/<name>.safetensors ("input_1", ...,
-- "output_1", ...) for the evaluator to compare with.
-- usage: tputrain tests/export/models.lua DIR [name... | all]   (no names: all but the large ones)
local tpu = require "tpu"
local nn = tpu.nn

local dir = assert(arg[1], "usage: models.lua DIR [name...]")
local key, draws  -- each case's own key and the number of draws from it
local function next_key()
  draws = draws + 1
  return key:fold_in(draws)
end

-- Every weight but the kernels (left as initialized, well scaled) replaced by random values, so
-- that BatchNorm's statistics, biases and betas take part in the comparison instead of their
-- zeros and ones. Mild values: a deep net with large random weights amplifies f32 rounding
-- past any tolerance (a change of one ulp in the weights then moves the outputs by 1e-3).
local function randomize(model)
  local list = {}
  for i, w in ipairs(model:named_parameters()) do
    local t, name = w.tensor, w.name
    local function normal(mean) return tpu.random.normal(next_key(), t.shape, {stddev = 0.2}) + mean end
    if t.dtype ~= "f32" or name:match("kernel$") or name:match("embeddings$") then
      list[i] = t
    elseif name:match("variance$") then
      list[i] = tpu.random.uniform(next_key(), t.shape) + 0.5
    else
      list[i] = normal(name:match("gamma$") and 1 or 0)
    end
  end
  model:set_parameters(list)
end

local function images(shape) return tpu.random.normal(next_key(), shape) end
local function ids(shape, vocab)
  return (tpu.random.uniform(next_key(), shape) * vocab):cast("i32")
end

local models = {}
local order = {}
local large = {}  -- exported only when named (or "all"): tens of millions of weights, seconds each
local position = {}  -- the case's seed
local function case(name, build, is_large)
  models[name] = build
  order[#order + 1] = name
  position[name] = #order
  large[name] = is_large
end

case("mlp", function()
  local m = nn.Sequential {nn.Input {shape = {12}}, nn.Dense(16, {activation = "relu"}), nn.BatchNorm(),
    nn.Dropout(0.3), nn.Dense(16, {activation = "tanh"}), nn.Dense(8, {activation = "gelu"}),
    nn.Dense(5, {activation = "softmax"})}
  return m, {images {4, 12}}
end)

case("activations", function()
  local layers = {nn.Input {shape = {6, 10}}}
  for _, a in ipairs {"sigmoid", "swish", "silu", "hard_sigmoid", "hard_swish", "relu6", "linear", "softmax"} do
    layers[#layers + 1] = nn.Dense(10, {activation = a})
  end
  layers[#layers + 1] = nn.Activation("gelu")
  return nn.Sequential(layers), {images {3, 6, 10} * 3}
end)

case("more_activations", function()
  local layers = {nn.Input {shape = {6, 10}}}
  for _, a in ipairs {"elu", "selu", "leaky_relu", "softplus", "softsign", "mish", "exponential", "log_softmax"} do
    layers[#layers + 1] = nn.Dense(10, {activation = a})
  end
  for _, a in ipairs {"elu", "selu", "leaky_relu", "softplus", "softsign", "mish", "log_softmax", "exponential"} do
    layers[#layers + 1] = nn.Activation(a)
  end
  return nn.Sequential(layers), {images {3, 6, 10} * 3}
end)

-- nn.ReLU in each of its forms (threshold, max_value and negative_slope alone and together),
-- LeakyReLU, ELU and Softmax over each axis, channels last (Dense) and first (after Conv2D).
case("activation_layers", function()
  local x = nn.Input {shape = {6, 6, 4}}
  local h = nn.Conv2D(8, 3, {padding = "same"})(x)
  local branches = {}
  local function branch(layer) branches[#branches + 1] = layer(h) end
  branch(nn.ReLU())
  branch(nn.ReLU(0.5))
  branch(nn.ReLU {negative_slope = 0.1})
  branch(nn.ReLU {threshold = 0.3})
  branch(nn.ReLU {threshold = -0.2, negative_slope = 0.25})
  branch(nn.ReLU {max_value = 0.8, negative_slope = 0.1, threshold = 0.2})
  branch(nn.LeakyReLU())
  branch(nn.LeakyReLU(0.05))
  branch(nn.ELU())
  branch(nn.ELU(0.5))
  branch(nn.Softmax())
  branch(nn.Softmax(2))
  branch(nn.Softmax {axis = -2})
  branch(nn.Softmax(4))
  local y = nn.Concatenate()(branches)
  local d = nn.Dense(5)(nn.Flatten()(h))
  local outs = {y, nn.Softmax(2)(nn.Reshape {5, 1}(d))}
  for _, layer in ipairs {nn.ReLU {threshold = 0.1, max_value = 1}, nn.LeakyReLU(), nn.ELU(2), nn.Softmax()} do
    outs[#outs + 1] = layer(d)
  end
  return nn.Model {inputs = x, outputs = outs}, {images {2, 6, 6, 4}}
end)

case("cnn", function()
  local m = nn.Sequential {nn.Input {shape = {16, 16, 3}},
    nn.Rescaling(1 / 2, {offset = -0.5}),
    nn.Conv2D(8, 3, {padding = "same", activation = "relu"}), nn.BatchNorm(), nn.MaxPool2D(),
    nn.Conv2D(12, {3, 2}, {strides = 2, use_bias = false}), nn.BatchNorm {epsilon = 1e-5},
    nn.Activation("relu"), nn.AvgPool2D(3, {strides = 1, padding = "same"}),
    nn.MaxPool2D(2, {strides = 1, padding = "same"}), nn.Flatten(), nn.Dense(10)}
  return m, {images {2, 16, 16, 3}}
end)

case("conv_kinds", function()
  local m = nn.Sequential {nn.Input {shape = {15, 13, 8}},
    nn.Conv2D(8, 3, {dilation_rate = 2, groups = 4, padding = "same"}),
    nn.DepthwiseConv2D(3, {strides = 2, depth_multiplier = 2, padding = "same", activation = "relu6"}),
    nn.SeparableConv2D(6, {3, 3}, {dilation_rate = 2, activation = "swish"}),
    nn.Conv2DTranspose(5, 3, {strides = 2, padding = "same"}),
    nn.Conv2DTranspose(4, {3, 2}, {strides = {2, 3}}),
    nn.Conv2DTranspose(3, 3, {strides = 2, padding = "same", output_padding = 0, dilation_rate = 1}),
    nn.Flatten()}  -- every position is compared: a row or column too many or too few fails
  return m, {images {2, 15, 13, 8}}
end)

case("borders", function()
  local m = nn.Sequential {nn.Input {shape = {7, 9, 3}},
    nn.ZeroPadding2D {padding = {{1, 2}, {0, 3}}}, nn.Conv2D(4, 3),
    nn.Rescaling({1, 2, 3, 4}, {offset = {0, 1, 0, -1}}),  -- per channel, on channels-first values
    nn.Cropping2D {cropping = {{1, 0}, {2, 1}}}, nn.UpSampling2D(2),
    nn.UpSampling2D({2, 3}, {interpolation = "bilinear"}), nn.GlobalAvgPool2D {keepdims = true},
    nn.Reshape {-1}}
  return m, {images {2, 7, 9, 3}}
end)

-- Layers that work in either layout, on channels-last values (straight from the input) and
-- on channels-first ones (after a convolution), with their axes mapped.
case("layouts", function()
  local image = nn.Input {shape = {8, 6, 3}}
  local last = nn.Cropping2D {cropping = {{1, 0}, {0, 2}}}(nn.ZeroPadding2D {padding = {{0, 1}, {2, 0}}}(image))
  local first = nn.Conv2D(3, 1)(image)
  local probs = nn.Activation("softmax")(first)  -- over the channels: axis 1 of the NCHW value
  local x = nn.Concatenate {axis = 3} {first, last, probs}  -- the width axis
  local pooled = nn.GlobalMaxPool2D {keepdims = true}(x)
  local y = nn.Multiply() {image, nn.GlobalAvgPool2D {keepdims = true}(image)}
  return nn.Model {inputs = image, outputs = {x, nn.Flatten()(pooled), y}}, {images {2, 8, 6, 3}}
end)

case("conv1d", function()
  local m = nn.Sequential {nn.Input {shape = {20, 6}},
    nn.Conv1D(8, 3, {padding = "causal", dilation_rate = 2, activation = "relu"}),
    nn.Conv1D(8, 4, {padding = "same", strides = 2, groups = 2}), nn.BatchNorm(),
    nn.Conv1D(4, 3), nn.LayerNorm(), nn.Flatten(), nn.Dense(3)}
  return m, {images {3, 20, 6}}
end)

case("functional", function()
  local image, meta = nn.Input {shape = {8, 8, 3}}, nn.Input {shape = {5}}
  local a = nn.Conv2D(6, 3, {padding = "same", activation = "relu"})(image)
  local b = nn.Conv2D(6, 1)(image)
  local x = nn.Add() {a, b}
  local gate = nn.Reshape {1, 1, 6}(nn.Dense(6, {activation = "sigmoid"})(nn.GlobalAvgPool2D()(x)))
  x = nn.Multiply() {x, gate}
  x = nn.Concatenate {axis = -1} {x, nn.DepthwiseConv2D(3, {padding = "same"})(x)}
  local h = nn.Concatenate() {nn.GlobalMaxPool2D()(x), nn.Dense(4)(meta)}
  local y1 = nn.Dense(3, {activation = "softmax"})(h)
  local y2 = nn.Flatten()(nn.Conv2D(2, 2, {strides = 2})(x))
  return nn.Model {inputs = {image, meta}, outputs = {y1, y2}}, {images {2, 8, 8, 3}, images {2, 5}}
end)

case("shared_u8", function()  -- u8 images in; one Conv2D and one Dense called twice
  local a, b = nn.Input {shape = {6, 6, 1}, dtype = "u8"}, nn.Input {shape = {6, 6, 1}, dtype = "u8"}
  local scale, conv, head = nn.Rescaling(1 / 255), nn.Conv2D(3, 3, {activation = "relu"}), nn.Dense(2)
  local function branch(x) return head(nn.Flatten()(conv(scale(x)))) end
  local model = nn.Model {inputs = {a, b}, outputs = nn.Add() {branch(a), branch(b)}}
  local function pixels() return (tpu.random.uniform(next_key(), {2, 6, 6, 1}) * 255):cast("u8") end
  return model, {pixels(), pixels()}
end)

case("embedding", function()
  local tokens = nn.Input {shape = {10}, dtype = "i32"}
  local x = nn.Embedding(50, 16)(tokens)
  x = nn.LayerNorm {epsilon = 1e-5}(x)
  local y = nn.Dense(16, {activation = "gelu"})(x)
  x = nn.LayerNorm()(nn.Add() {x, y})
  x = nn.Flatten()(x)
  return nn.Model {inputs = tokens, outputs = nn.Dense(4)(x)}, {ids({3, 10}, 50)}
end)

case("normalization", function()
  local m = nn.Sequential {nn.Input {shape = {6, 6, 3}}, nn.Normalization(),
    nn.Normalization {mean = {0.5, 0, -1}, variance = {4, 1, 0.25}},
    nn.Normalization {axis = 2, mean = 1, variance = 2},
    nn.Conv2D(4, 3), nn.GlobalAvgPool2D()}
  return m, {images {2, 6, 6, 3}}
end)

case("attention", function()
  local tokens, mask = nn.Input {shape = {7}, dtype = "i32"}, nn.Input {shape = {7}, dtype = "i32"}
  local target = nn.Input {shape = {5, 12}}
  local x = nn.Embedding(30, 12)(tokens)
  x = nn.Add() {x, nn.PositionEmbedding {sequence_length = 9}(x)}
  x = nn.TransformerEncoder {num_heads = 3, intermediate_dim = 16, activation = "gelu"} {x, mask = mask}
  x = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8, normalize_first = true}(x)
  local y = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 10}
    {target, x, encoder_padding_mask = mask}
  y = nn.TransformerDecoder {num_heads = 4, intermediate_dim = 6, normalize_first = true}(y)
  local cross = nn.MultiHeadAttention {num_heads = 2, key_dim = 3, value_dim = 5, output_dim = 4} {y, x, x}
  local causal = nn.MultiHeadAttention {num_heads = 1, key_dim = 4} {y, use_causal_mask = true}
  local out = nn.Concatenate() {nn.Flatten()(cross), nn.Flatten()(causal)}
  local mask_values = tpu.tensor({{1, 1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 1, 1}}, {dtype = "i32"})
  local model = nn.Model {inputs = {tokens, mask, target}, outputs = out}
  return model, {ids({2, 7}, 30), mask_values, images {2, 5, 12}}
end)

case("variable_length", function()  -- the length is a named dimension of the graph's input
  local tokens = nn.Input {shape = {-1}, dtype = "i32"}
  local x = nn.Embedding(20, 8)(tokens)
  x = nn.Add() {x, nn.PositionEmbedding {sequence_length = 10}(x)}
  x = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8}(x)
  x = nn.Conv1D(4, 3, {padding = "causal"})(x)
  return nn.Model {inputs = tokens, outputs = nn.Dense(3)(x)}, {ids({2, 6}, 20)}
end)

-- A custom layer with export_onnx: its own weights (onnx:weight), a child layer (onnx:layer)
-- and constants; y = x + relu(x @ kernel) * sigmoid(gate) + 0.5 * inner(x).
local Gated = nn.Module:extend("Gated")
function Gated:build(input_shape)
  local n = input_shape[#input_shape]
  self:add_weight {name = "kernel", shape = {n, n}, initializer = "he_normal"}
  self:add_weight {name = "gate", shape = {n}, initializer = "zeros"}
  self.inner = nn.Dense(n, {activation = "tanh"})
  self.modules = {self.inner}  -- a child layer: its weights are the model's
  self.inner:maybe_build(input_shape)
end
function Gated:call(x, ctx)
  return x + x:matmul(self.kernel):relu() * self.gate:sigmoid() + self.inner(x, ctx) * 0.5
end
function Gated:export_onnx(onnx, x, out_shape)
  local h = onnx:op("MatMul", {x, onnx:weight(self.kernel)}, nil, out_shape)
  h = onnx:op("Relu", {h}, nil, out_shape)
  local gate = onnx:op("Sigmoid", {onnx:weight(self.gate)}, nil, self.gate.shape)
  local inner = onnx:op("Mul", {onnx:layer(self.inner, x), onnx:constant(0.5)}, nil, out_shape)
  local y = onnx:op("Add", {x, onnx:op("Mul", {h, gate}, nil, out_shape)}, nil, out_shape)
  return onnx:op("Add", {y, inner}, nil, out_shape)
end

case("custom_export", function()
  local m = nn.Sequential {nn.Input {shape = {5, 8}}, nn.Conv1D(6, 3, {padding = "same"}), Gated(),
    nn.Flatten(), nn.Dense(4)}
  return m, {images {2, 5, 8}}
end)

-- The models of the example scripts (scripts/), built as they build them.
case("fashion_mnist_mlp", function()
  return nn.Sequential {nn.Flatten(), nn.Dense(512, {activation = "relu"}), nn.Dense(512, {activation = "relu"}),
    nn.Dense(10)}, {images {2, 28, 28}}
end)

case("fashion_mnist_cnn", function()
  return nn.Sequential {nn.Conv2D(32, 3, {activation = "relu", padding = "same"}), nn.MaxPool2D(),
    nn.Conv2D(64, 3, {activation = "relu", padding = "same"}), nn.MaxPool2D(), nn.Flatten(),
    nn.Dense(128, {activation = "relu"}), nn.Dense(10)}, {images {2, 28, 28, 1}}
end)

case("functional_two_inputs", function()
  local image, stats = nn.Input {shape = {28, 28, 1}, name = "image"}, nn.Input {shape = {56}, name = "stats"}
  local a = nn.MaxPool2D()(nn.Conv2D(16, 3, {activation = "relu"})(image))
  a = nn.Flatten()(nn.MaxPool2D()(nn.Conv2D(32, 3, {activation = "relu"})(a)))
  local b = nn.Dense(32, {activation = "relu"})(stats)
  local h = nn.Dense(64, {activation = "relu"})(nn.Concatenate {axis = -1} {a, b})
  return nn.Model {inputs = {image, stats}, outputs = {nn.Dense(10, {name = "class"})(h),
    nn.Dense(1, {activation = "sigmoid", name = "footwear"})(h)}}, {images {2, 28, 28, 1}, images {2, 56}}
end)

-- scripts/custom_layer.lua's model, its GatedResidual (with export_onnx) read from the script:
-- the part before the script loads its data.
case("custom_layer", function()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  local f = assert(io.open(here .. "/../../scripts/custom_layer.lua"))
  local src = f:read("a")
  f:close()
  local cut = assert(src:find("local function scale", 1, true), "custom_layer.lua: no data part")
  local GatedResidual = assert(load(src:sub(1, cut - 1) .. "return GatedResidual\n", "=custom_layer.lua"))()
  local model = nn.Sequential {nn.Flatten(), nn.Dense(256, {activation = "relu"}),
    GatedResidual {l2 = 1e-5}, GatedResidual {l2 = 1e-5}, nn.Dense(10)}
  return model, {images {2, 28, 28}}
end)

-- The image applications, at their smallest input and with logits out (a softmax would hide
-- errors in its saturated outputs).
for _, app in ipairs {{"MobileNetV2", 32}, {"EfficientNetB0", 32}, {"NASNetMobile", 32},
                      {"ResNet50", 32, true}, {"Xception", 71, true}, {"VGG16", 32, true},
                      {"AlexNet", 63, true}} do
  local name, size = app[1], app[2]
  case(name, function()
    local model = tpu.applications[name] {input_shape = {size, size, 3}, classes = 10,
                                          classifier_activation = "linear"}
    return model, {images {2, size, size, 3}}
  end, app[3])
end

-- The text applications, small; their inputs at the longest length the model takes
-- (max_length) and shorter. GPT-2's causal mask is built from the length the graph runs with.
local small = {vocab_size = 50, max_length = 16, num_layers = 1, hidden_dim = 32, num_heads = 2,
               intermediate_dim = 64}
local function with(extra)
  local opts = {}
  for k, v in pairs(small) do opts[k] = v end
  for k, v in pairs(extra or {}) do opts[k] = v end
  return opts
end
-- A padding mask [batch, length]: the first row pads its last three positions.
local function padding(batch, length)
  local rows = {}
  for i = 1, batch do
    rows[i] = {}
    for j = 1, length do rows[i][j] = (i == 1 and j > length - 3) and 0 or 1 end
  end
  return tpu.tensor(rows, {dtype = "i32"})
end
local function segments(batch, length)
  return (tpu.random.uniform(next_key(), {batch, length}) * 2):cast("i32")
end

case("BertBase", function()
  return tpu.applications.BertBase(with {num_layers = 2}),
    {ids({2, 16}, 50), segments(2, 16), padding(2, 16)}
end)

case("BertBase_classifier", function()
  return tpu.applications.BertBase(with {num_classes = 3}),
    {ids({3, 9}, 50), segments(3, 9), padding(3, 9)}
end)

case("GPT2Small", function()
  return tpu.applications.GPT2Small(with {num_layers = 2}), {ids({2, 16}, 50), padding(2, 16)}
end)

case("GPT2Small_logits", function()
  return tpu.applications.GPT2Small(with {logits = true}), {ids({2, 16}, 50), padding(2, 16)}
end)

case("GPT2Small_logits_short", function()
  return tpu.applications.GPT2Small(with {logits = true}), {ids({2, 7}, 50), padding(2, 7)}
end)

-- scripts/fortunes_gpt.lua's model (its vocabulary of 64 characters).
case("fortunes_gpt", function()
  local model = tpu.applications.GPT2Small {vocab_size = 64, max_length = 128, num_layers = 2,
    hidden_dim = 64, num_heads = 2, intermediate_dim = 256, dropout = 0, logits = true}
  return model, {ids({2, 128}, 64), padding(2, 128)}
end)

-- A data set of one batch, the list of a model's inputs (predict takes several inputs so).
local function one_batch(list)
  return {iter = function()
    local done = false
    return function()
      if done then return nil end
      done = true
      return list
    end
  end}
end

local wanted = {table.unpack(arg, 2)}
if #wanted == 0 or wanted[1] == "all" then
  local every = #wanted > 0
  wanted = {}
  for _, name in ipairs(order) do
    if every or not large[name] then wanted[#wanted + 1] = name end
  end
end
for _, name in ipairs(wanted) do
  key, draws = tpu.random.key(position[name]), 0  -- a case draws the same numbers in any selection
  local model, inputs = assert(models[name], "no model " .. name)()
  local data = #inputs == 1 and inputs[1] or one_batch(inputs)
  model:predict(data)  -- builds a Sequential without nn.Input, as fit would
  randomize(model)
  local out = model:predict(data)
  model:export(dir .. "/" .. name .. ".onnx")
  local saved = {}
  for i, x in ipairs(inputs) do saved["input_" .. i] = x end
  for i, y in ipairs(tpu.is_tensor(out) and {out} or out) do saved["output_" .. i] = y end
  tpu.save(dir .. "/" .. name .. ".safetensors", saved)
  print("exported " .. name)
end
