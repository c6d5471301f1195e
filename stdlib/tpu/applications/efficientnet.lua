-- EfficientNetB0 (Tan and Le, 2019) as Keras builds it: the input rescaled to 0..1 and
-- standardized (nn.Rescaling, then nn.Normalization whose mean, variance and count are
-- non-trainable weights, zeros and ones until set by adapt or model:load), a 3x3 stride-2 stem,
-- 16 MBConv blocks in 7 stages (a 1x1 expansion, a depthwise convolution, a squeeze-and-excite
-- gate, a linear 1x1 projection, the input added back through stochastic depth where the
-- shapes match), a 1x1 convolution to 1280 channels, global average pooling, Dropout(0.2) and
-- the classifier. swish activations; BatchNorm with Keras's defaults (epsilon 1e-3, momentum
-- 0.99); kernels drawn as Keras's (variance scaling by fan-out). 5,330,571 parameters at
-- 224x224 with 1000 classes, 42,023 of them non-trainable; 4,049,571 without the top.
--
--   local model = tpu.applications.EfficientNetB0 {input_shape = {64, 64, 3}, classes = 10}
local tpu = require "tpu"
local nn = tpu.nn
local common = require "tpu.applications.common"

-- Keras's VarianceScaling by fan-out (the kernel's last axis times its window): a truncated
-- normal of scale 2 for the convolutions, a uniform of scale 1/3 for the classifier.
local function fan_out(shape)
  local n = shape[#shape]
  for i = 1, #shape - 2 do n = n * shape[i] end
  return n
end
local function conv_init(key, shape, dtype)
  local stddev = math.sqrt(2 / fan_out(shape)) / 0.87962566103423978  -- a truncated normal's
  return tpu.random.normal(key, shape, {stddev = stddev, truncated = true}):cast(dtype or "f32")
end
local function dense_init(key, shape, dtype)
  local limit = math.sqrt(3 * (1 / 3) / fan_out(shape))
  return tpu.random.uniform(key, shape, {minval = -limit, maxval = limit}):cast(dtype or "f32")
end

local function bn(name) return nn.BatchNorm {epsilon = 1e-3, name = name} end
local function swish(name) return nn.Activation("swish", {name = name}) end

-- A 1x1 convolution: a linear one without bias (expansion, projection, top), or the
-- squeeze-and-excite's with its activation and a bias.
local function conv1x1(filters, name, activation)
  return nn.Conv2D(filters, 1, {padding = "same", use_bias = activation ~= nil, activation = activation,
                                kernel_initializer = conv_init, name = name})
end

-- One MBConv block: b = {kernel, filters_in, filters_out, expansion, strides}; `drop` is its
-- stochastic depth rate.
local function block(x, b, drop, name)
  local kernel, filters_in, filters_out, expansion, strides = table.unpack(b)
  local input, filters = x, filters_in * expansion
  if expansion ~= 1 then
    x = swish(name .. "expand_activation")(bn(name .. "expand_bn")(conv1x1(filters, name .. "expand_conv")(x)))
  end
  if strides == 2 then
    x = nn.ZeroPadding2D {padding = common.correct_pad(x, kernel), name = name .. "dwconv_pad"}(x)
  end
  x = nn.DepthwiseConv2D(kernel, {strides = strides, padding = strides == 2 and "valid" or "same",
                                  use_bias = false, depthwise_initializer = conv_init, name = name .. "dwconv"})(x)
  x = swish(name .. "activation")(bn(name .. "bn")(x))
  -- squeeze and excite: a gate per channel from the globally pooled map
  local se = nn.GlobalAveragePooling2D {name = name .. "se_squeeze"}(x)
  se = nn.Reshape({1, 1, filters}, {name = name .. "se_reshape"})(se)
  se = conv1x1(math.max(1, filters_in // 4), name .. "se_reduce", "swish")(se)
  se = conv1x1(filters, name .. "se_expand", "sigmoid")(se)
  x = nn.Multiply {name = name .. "se_excite"} {x, se}
  x = bn(name .. "project_bn")(conv1x1(filters_out, name .. "project_conv")(x))
  if strides == 1 and filters_in == filters_out then
    if drop > 0 then x = nn.Dropout(drop, {noise_shape = {-1, 1, 1, 1}, name = name .. "drop"})(x) end
    x = nn.Add {name = name .. "add"} {x, input}
  end
  return x
end

-- {kernel, repeats, filters_in, filters_out, expansion, strides of the first block}
local stages = {{3, 1, 32, 16, 1, 1}, {3, 2, 16, 24, 6, 2}, {5, 2, 24, 40, 6, 2}, {3, 3, 40, 80, 6, 2},
                {5, 3, 80, 112, 6, 1}, {5, 4, 112, 192, 6, 2}, {3, 1, 192, 320, 6, 1}}

return function(opts, extra)
  local a = common.args("EfficientNetB0", opts, {name = "efficientnetb0", size = 224}, extra)
  local input = nn.Input {shape = a.input_shape}
  local x = nn.Rescaling(1 / 255, {name = "rescaling"})(input)
  x = nn.Normalization {name = "normalization"}(x)
  x = nn.ZeroPadding2D {padding = common.correct_pad(x, 3), name = "stem_conv_pad"}(x)
  x = nn.Conv2D(32, 3, {strides = 2, use_bias = false, kernel_initializer = conv_init, name = "stem_conv"})(x)
  x = swish("stem_activation")(bn("stem_bn")(x))
  local done, total = 0, 16  -- blocks built so far, in all; the drop rate grows to 0.2 * 15/16
  for i, s in ipairs(stages) do
    local kernel, repeats, filters_in, filters_out, expansion, strides = table.unpack(s)
    for j = 1, repeats do
      local b = {kernel, j == 1 and filters_in or filters_out, filters_out, expansion, j == 1 and strides or 1}
      x = block(x, b, 0.2 * done / total, string.format("block%d%s_", i, string.char(96 + j)))
      done = done + 1
    end
  end
  x = swish("top_activation")(bn("top_bn")(conv1x1(1280, "top_conv")(x)))
  if a.include_top then
    x = nn.GlobalAveragePooling2D {name = "avg_pool"}(x)
    x = nn.Dropout(0.2, {name = "top_dropout"})(x)
    x = nn.Dense(a.classes, {activation = a.classifier_activation, kernel_initializer = dense_init,
                             name = "predictions"})(x)
  else
    x = common.pool(x, a.pooling, true)
  end
  return common.model(a, input, x)
end
