-- What the image builders of tpu.applications share: Keras's arguments, checked, and the
-- classifier or pooling at the end.
local nn = require("tpu").nn
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local options = {"input_shape", "include_top", "classes", "pooling", "classifier_activation",
                 "weights", "name"}

local function check_input_shape(who, shape, min_size)
  local ok = type(shape) == "table" and not util.is_tensor(shape) and #shape == 3
  for i = 1, 3 do ok = ok and util.is_positive_integer(shape[i]) end
  if not ok then
    util.fail("%s: input_shape must be {height, width, channels} (positive integers, without the "
      .. "batch), got %s", who, util.show(shape))
  end
  if shape[1] < min_size or shape[2] < min_size then
    util.fail("%s: input_shape must be at least %dx%d, got %s", who, min_size, min_size, util.show(shape))
  end
  return {math.tointeger(shape[1]), math.tointeger(shape[2]), math.tointeger(shape[3])}
end

-- The checked arguments of builder `who` with Keras's defaults.
-- defaults: {name=, size= (input height and width), min_size=}; extra: the builder's second
-- argument (there is none).
function M.args(who, opts, defaults, extra)
  errors.none(2, who, extra)
  opts = opts or {}
  util.check_options({__name = who}, opts, options)
  if opts.weights ~= nil then
    util.fail("%s: weights = %s: pretrained weights cannot be downloaded; build with weights = nil "
      .. "and read a safetensors file with model:load(path)", who, util.show(opts.weights))
  end
  local a = {
    include_top = util.flag(who, opts, "include_top", true),
    input_shape = check_input_shape(who, opts.input_shape or {defaults.size, defaults.size, 3},
      defaults.min_size or 32),
    pooling = opts.pooling,
    -- false is Keras's None: the logits (no activation); nil is the default softmax
    classifier_activation = opts.classifier_activation == false and "linear"
                            or opts.classifier_activation or "softmax",
    name = opts.name or defaults.name,
    default_size = opts.input_shape == nil,
  }
  if a.pooling ~= nil and a.pooling ~= "avg" and a.pooling ~= "max" then
    util.fail("%s: pooling must be \"avg\", \"max\" or nil, got %s", who, util.show(a.pooling))
  end
  if a.include_top then
    if a.pooling ~= nil then
      util.fail("%s: pooling applies to the features without the top; give include_top = false "
        .. "with pooling = %s, or leave pooling out", who, util.show(a.pooling))
    end
    a.classes = util.check_integer(who, "classes", opts.classes or 1000)
  elseif opts.classes ~= nil then
    util.fail("%s: classes = %s needs the top (include_top = true); without it the model ends at "
      .. "the features", who, util.show(opts.classes))
  end
  if type(a.name) ~= "string" then util.fail("%s: name must be a string, got %s", who, util.show(a.name)) end
  return a
end

-- The features x with the global pooling asked for (include_top = false), named as Keras names
-- it: "avg_pool" / "max_pool" when `named` (ResNet50, EfficientNet), else the names a fresh Keras
-- session gives the unnamed layer (VGG16, Xception, MobileNetV2, NASNet).
function M.pool(x, pooling, named)
  if pooling == "avg" then
    return nn.GlobalAveragePooling2D {name = named and "avg_pool" or "global_average_pooling2d"}(x)
  end
  if pooling == "max" then
    return nn.GlobalMaxPooling2D {name = named and "max_pool" or "global_max_pooling2d"}(x)
  end
  return x
end

-- The model's end: with include_top, global average pooling (its layer named `pool_name`) and
-- the classifier Dense "predictions"; without, the features pooled as asked (M.pool, `named`).
function M.top(x, a, pool_name, named)
  if not a.include_top then return M.pool(x, a.pooling, named) end
  x = nn.GlobalAveragePooling2D {name = pool_name}(x)
  return nn.Dense(a.classes, {activation = a.classifier_activation, name = "predictions"})(x)
end

-- The model from input to x, named a.name. Built at the default size (no input_shape), its
-- error for an input of another size says to give input_shape: Keras's models without the top
-- take any size, but a graph here has static shapes.
function M.model(a, input, x)
  local model = nn.Model {inputs = input, outputs = x, name = a.name}
  if a.default_size then
    local s = a.input_shape
    rawset(model, "_input_hint", string.format("built without input_shape, the model takes "
      .. "%dx%d images only: build it with input_shape = {height, width, channels} for another size",
      s[1], s[2]))
  end
  return model
end

-- Keras's padding before a stride-2 `kernel`x`kernel` "valid" convolution of x ({{top, bottom},
-- {left, right}}): kernel // 2 on each side, one less before an even size, so the output is
-- half the input whatever its parity.
function M.correct_pad(x, kernel)
  local k = kernel // 2
  local h, w = x.shape[2], x.shape[3]
  return {{k - (1 - h % 2), k}, {k - (1 - w % 2), k}}
end

return M
