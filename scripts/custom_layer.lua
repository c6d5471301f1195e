-- A custom layer: subclass nn.Module with build (create weights from the input shape) and call
-- (the forward pass; ctx.training says whether we train), and export_onnx if model:export should
-- write it. This one is a residual block with a learned gate, y = x + sigmoid(gate) * dense(x),
-- trained on Fashion-MNIST.
--
--   tputrain scripts/custom_layer.lua            (--smoke: a few batches)
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local smoke = arg ~= nil and arg[1] == "--smoke"

local GatedResidual = nn.Module:extend("GatedResidual")

-- Arguments are checked when the layer is made (level 3: the error points at the caller's line).
function GatedResidual:__init(opts)
  opts = opts or {}
  self:init_common(opts)                      -- name, dtype, trainable
  self.l2 = opts.l2 or 0
  if type(self.l2) ~= "number" or self.l2 < 0 then
    error("GatedResidual: l2 must be a number >= 0, got " .. tostring(opts.l2), 3)
  end
end

function GatedResidual:build(input_shape)
  local n = input_shape[#input_shape]
  self:add_weight {name = "kernel", shape = {n, n}, initializer = "he_normal",
                   regularizer = nn.regularizers.l2(self.l2)}
  self:add_weight {name = "gate", shape = {n}, initializer = "zeros"}
end

function GatedResidual:call(x, _ctx)
  return x + (x:matmul(self.kernel)):relu() * self.gate:sigmoid()
end

-- Its ONNX form, for model:export (docs/model.md): the same arithmetic as call, in graph nodes.
function GatedResidual:export_onnx(onnx, x, out_shape)
  local h = onnx:op("MatMul", {x, onnx:weight(self.kernel)}, nil, out_shape)
  h = onnx:op("Relu", {h}, nil, out_shape)
  local gate = onnx:op("Sigmoid", {onnx:weight(self.gate)}, nil, self.gate.shape)
  return onnx:op("Add", {x, onnx:op("Mul", {h, gate}, nil, out_shape)}, nil, out_shape)
end

-- What print(model) shows for this layer.
function GatedResidual:repr()
  return string.format("nn.GatedResidual(%s)", self.built and self.kernel.shape[1] or "?")
end

local function scale(x, y) return x:cast("f32") / 255, y end
local train = data.fashion_mnist("train"):shuffle(60000, {seed = 1})
  :batch(256, {drop_remainder = true}):map(scale)
local test = data.fashion_mnist("test"):batch(1000):map(scale)
if smoke then train, test = train:take(3), test:take(1) end

local model = nn.Sequential {
  nn.Flatten(),
  nn.Dense(256, {activation = "relu"}),
  GatedResidual {l2 = 1e-5},
  GatedResidual {l2 = 1e-5},
  nn.Dense(10),
}
model:build({256, 28, 28})
print(model)
model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy",
               metrics = {"accuracy"}}
model:fit(train, {epochs = smoke and 1 or 2, validation_data = test})
print(string.format("test accuracy: %.4f", model:evaluate(test, {verbose = 0}).accuracy))
