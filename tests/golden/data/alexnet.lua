-- The AlexNet-style model and train step of the hbm_alexnet golden scripts: five convolutions,
-- three max-pools and three dense layers (62M parameters) on 227x227x3 images, trained with SGD
-- in one tpu.jit step. Returns the step and a function giving its arguments for a per-core batch
-- of n; the batch is a shape only (tpu.shape_dtype): compiling the step checks its HBM plan
-- before any data exists, so the host never holds a batch that would not fit the device.
local tpu = require "tpu"
local nn = tpu.nn

return function()
  local model = nn.Sequential {
    nn.Conv2D(96, 11, {strides = 4, activation = "relu"}),
    nn.MaxPool2D(3, {strides = 2}),
    nn.Conv2D(256, 5, {padding = "same", activation = "relu"}),
    nn.MaxPool2D(3, {strides = 2}),
    nn.Conv2D(384, 3, {padding = "same", activation = "relu"}),
    nn.Conv2D(384, 3, {padding = "same", activation = "relu"}),
    nn.Conv2D(256, 3, {padding = "same", activation = "relu"}),
    nn.MaxPool2D(3, {strides = 2}),
    nn.Flatten(),
    nn.Dense(4096, {activation = "relu"}),
    nn.Dense(4096, {activation = "relu"}),
    nn.Dense(1000),
  }
  model:build {1, 227, 227, 3}
  local weights = model:parameters()
  local opt = tpu.optim.SGD {lr = 0.01}
  local step = tpu.jit(function(params, x, y)
    local function loss(p)
      model:set_parameters(p)
      return tpu.losses.sparse_categorical_crossentropy(y, model(x, {training = true}), {from_logits = true}):mean()
    end
    local l, grads = tpu.value_and_grad(loss)(params)
    model:set_parameters(weights)
    local new = opt:update(params, grads, opt:init(params))
    return new, l
  end, {name = "train_step", donate_argnums = 1})
  local function args(n) return weights, tpu.shape_dtype({n, 227, 227, 3}), tpu.shape_dtype({n}, "i32") end
  return step, args
end
