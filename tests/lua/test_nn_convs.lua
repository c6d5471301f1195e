-- Tests of the convolution layers beyond Conv2D's basics: Conv2D's dilation_rate and groups,
-- DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, Conv1D, and UpSampling2D. Values against tpu.conv2d /
-- tpu.conv2d_transpose and per-channel convs, Keras's weight shapes and parameter counts,
-- gradients against finite differences.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

local function built(layer, shape)
  layer:build(shape)
  return layer
end

function T.conv2d_dilation_and_groups()
  local x = rand({2, 7, 6, 4}, 1)
  local conv = nn.Conv2D(6, 3, {dilation_rate = 2, groups = 2, padding = "same", use_bias = false})
  local y = conv(x)
  check.eq(conv.kernel.shape, {3, 3, 2, 6})
  check.near(y:totable(), x:conv2d(conv.kernel, {dilation = 2, groups = 2, padding = "same"}):totable(), 1e-5)
  check.eq(y.shape, conv:compute_output_shape(x.shape))
  check.eq(nn.Conv2D(4, 3, {dilation_rate = {2, 1}})(x).shape, {2, 3, 4, 4})
  -- Keras: Conv2D(64, 3, groups=4) on 32 channels: 3*3*8*64 + 64 = 4,672
  check.eq(built(nn.Conv2D(64, 3, {groups = 4}), {1, 8, 8, 32}):count_params(), 4672)
  nn_check.gradients(nn.Conv2D(4, 2, {groups = 2, dilation_rate = 2, activation = "tanh"}), rand({1, 5, 5, 2}, 2))
end

-- Channel c of the depthwise conv's output m is input channel c by its filter m.
function T.depthwise_conv2d_is_a_conv_per_channel()
  local x = rand({2, 6, 5, 3}, 3)
  local layer = nn.DepthwiseConv2D(3, {depth_multiplier = 2, strides = 2, padding = "same"})
  local y = layer(x)
  check.eq(layer.depthwise_kernel.shape, {3, 3, 3, 2})
  check.eq(layer.bias.shape, {6})
  check.eq(y.shape, {2, 3, 3, 6})
  check.eq(y.shape, layer:compute_output_shape(x.shape))
  local k = layer.depthwise_kernel
  for c = 1, 3 do
    local xc = x:slice {{1, 2}, {1, 6}, {1, 5}, {c, c}}
    for m = 1, 2 do
      local w = k:slice {{1, 3}, {1, 3}, {c, c}, {m, m}}
      local want = xc:conv2d(w, {strides = 2, padding = "same"})
      local got = y:slice {{1, 2}, {1, 3}, {1, 3}, {(c - 1) * 2 + m, (c - 1) * 2 + m}}
      check.near(got:totable(), want:totable(), 1e-5, "channel " .. c .. " filter " .. m)
    end
  end
end

function T.depthwise_conv2d_counts_and_gradients()
  -- Keras: DepthwiseConv2D(3) on 32 channels = 32*9 + 32 = 320
  check.eq(built(nn.DepthwiseConv2D(3), {1, 8, 8, 32}):count_params(), 320)
  check.eq(built(nn.DepthwiseConv2D(5, {depth_multiplier = 2, use_bias = false}), {1, 8, 8, 16}):count_params(), 800)
  nn_check.gradients(nn.DepthwiseConv2D(3, {padding = "same", activation = "tanh"}), rand({1, 4, 5, 3}, 4))
  nn_check.gradients(nn.DepthwiseConv2D({2, 3}, {strides = 2, depth_multiplier = 2}), rand({2, 5, 5, 2}, 5))
  nn_check.gradients(nn.DepthwiseConv2D(2, {dilation_rate = 2}), rand({1, 5, 4, 2}, 6))
end

function T.separable_conv2d_is_depthwise_then_pointwise()
  local x = rand({2, 6, 6, 4}, 7)
  local layer = nn.SeparableConv2D(5, 3, {padding = "same", depth_multiplier = 2})
  local y = layer(x)
  check.eq(layer.depthwise_kernel.shape, {3, 3, 4, 2})
  check.eq(layer.pointwise_kernel.shape, {1, 1, 8, 5})
  local dw = nn.DepthwiseConv2D(3, {padding = "same", depth_multiplier = 2, use_bias = false})
  dw(x)
  dw:set_parameters {layer.depthwise_kernel}
  local want = dw(x):conv2d(layer.pointwise_kernel) + layer.bias
  check.near(y:totable(), want:totable(), 1e-5)
  -- Keras: SeparableConv2D(64, 3) on 32 channels = 32*9 + 32*64 + 64 = 2,400
  check.eq(built(nn.SeparableConv2D(64, 3), {1, 8, 8, 32}):count_params(), 2400)
  nn_check.gradients(nn.SeparableConv2D(3, 2, {strides = 2, activation = "tanh"}), rand({1, 5, 5, 2}, 8))
end

function T.conv2d_transpose_shapes_values_and_gradients()
  local x = rand({2, 4, 3, 3}, 9)
  local layer = nn.Conv2DTranspose(5, 3, {strides = 2, padding = "same"})
  local y = layer(x)
  check.eq(layer.kernel.shape, {3, 3, 5, 3})
  check.eq(y.shape, {2, 8, 6, 5})
  local want = x:conv2d_transpose(layer.kernel, {strides = 2, padding = "same"}) + layer.bias
  check.near(y:totable(), want:totable(), 1e-5)
  for _, c in ipairs {{{strides = 2}, {2, 9, 7, 5}}, {{strides = 2, output_padding = 1}, {2, 10, 8, 5}},
                      {{strides = {2, 3}, padding = "same"}, {2, 8, 9, 5}}, {{}, {2, 6, 5, 5}},
                      {{dilation_rate = 2}, {2, 8, 7, 5}}} do
    local l = nn.Conv2DTranspose(5, 3, c[1])
    check.eq(l(x).shape, c[2])
    check.eq(l:compute_output_shape(x.shape), c[2])
  end
  -- Keras: Conv2DTranspose(16, 3) on 8 channels = 3*3*16*8 + 16 = 1,168
  check.eq(built(nn.Conv2DTranspose(16, 3), {1, 4, 4, 8}):count_params(), 1168)
  nn_check.gradients(nn.Conv2DTranspose(2, 3, {strides = 2, padding = "same", activation = "tanh"}), rand({1, 3, 2, 2}, 10))
end

function T.conv1d_is_a_one_row_conv2d()
  local x = rand({2, 9, 4}, 11)
  local layer = nn.Conv1D(6, 3, {strides = 2, padding = "same", groups = 2})
  local y = layer(x)
  check.eq(layer.kernel.shape, {3, 2, 6})
  check.eq(y.shape, {2, 5, 6})
  local want = x:reshape {2, 1, 9, 4}:conv2d(layer.kernel:reshape {1, 3, 2, 6},
    {strides = {1, 2}, padding = "same", groups = 2}):reshape {2, 5, 6} + layer.bias
  check.near(y:totable(), want:totable(), 1e-5)
  check.eq(nn.Conv1D(3, 4, {dilation_rate = 2})(x).shape, {2, 3, 3})
  -- Keras: Conv1D(32, 3) on 16 channels = 3*16*32 + 32 = 1,568
  check.eq(built(nn.Conv1D(32, 3), {1, 10, 16}):count_params(), 1568)
  nn_check.gradients(nn.Conv1D(3, 2, {dilation_rate = 2, activation = "tanh"}), rand({2, 6, 2}, 12))
end

-- causal: the output at step t depends on inputs up to t only, and keeps the length.
function T.conv1d_causal_padding()
  local layer = nn.Conv1D(2, 3, {padding = "causal", dilation_rate = 2})
  local x = rand({1, 8, 3}, 13)
  local y = layer(x)
  check.eq(y.shape, {1, 8, 2})
  local later = tpu.concat({x:slice {{1, 1}, {1, 5}}, rand({1, 3, 3}, 14)}, 2)
  check.near(layer(later):slice {{1, 1}, {1, 5}}:totable(), y:slice {{1, 1}, {1, 5}}:totable(), 1e-6)
end

-- tf.image.resize's values (half-pixel centres): [0, 1, 2] doubled is [0, .25, .75, 1.25, 1.75, 2];
-- [0, 3] tripled is [0, 0, 1, 2, 3, 3] (the edges clamp).
function T.upsampling2d_nearest_and_bilinear()
  local x = tpu.arange(6):cast("f32"):reshape {1, 2, 3, 1}
  check.eq(nn.UpSampling2D()(x):reshape {4, 6}:totable(),
    {{0, 0, 1, 1, 2, 2}, {0, 0, 1, 1, 2, 2}, {3, 3, 4, 4, 5, 5}, {3, 3, 4, 4, 5, 5}})
  local y = nn.UpSampling2D(2, {interpolation = "bilinear"})(x):reshape {4, 6}
  check.near(y:totable(), {{0, 0.25, 0.75, 1.25, 1.75, 2}, {0.75, 1, 1.5, 2, 2.5, 2.75},
                           {2.25, 2.5, 3, 3.5, 4, 4.25}, {3, 3.25, 3.75, 4.25, 4.75, 5}}, 1e-6)
  local row = nn.UpSampling2D {size = {1, 3}, interpolation = "bilinear"}(tpu.tensor {0, 3}:reshape {1, 1, 2, 1})
  check.near(row:reshape {6}:totable(), {0, 0, 1, 2, 3, 3}, 1e-6)
  local layer = nn.UpSampling2D {size = {2, 3}}
  check.eq(layer(rand({2, 3, 4, 5}, 17)).shape, {2, 6, 12, 5})
  check.eq(layer:compute_output_shape({2, 3, 4, 5}), {2, 6, 12, 5})
  check.eq(tostring(layer), "nn.UpSampling2D(2x3, nearest)")
  nn_check.gradients(nn.UpSampling2D(), rand({1, 2, 3, 2}, 18))
  nn_check.gradients(nn.UpSampling2D({3, 2}, {interpolation = "bilinear"}), rand({2, 3, 2, 2}, 19))
end

function T.conv_layers_train_inside_fit()
  local model = nn.Sequential {
    nn.Conv2D(4, 3, {padding = "same", groups = 2}), nn.DepthwiseConv2D(3, {activation = "relu"}),
    nn.SeparableConv2D(4, 3, {padding = "same"}), nn.Conv2DTranspose(2, 2, {strides = 2}),
    nn.UpSampling2D(2, {interpolation = "bilinear"}), nn.Flatten(), nn.Dense(2),
  }
  model:compile {optimizer = tpu.optim.Adam {lr = 1e-2}, loss = "mse"}
  local x, y = rand({8, 6, 6, 2}, 15), rand({8, 2}, 16)
  local history = model:fit(x, y, {epochs = 5, batch_size = 8, verbose = 0})
  local loss = history.history.loss
  check.is_true(loss[#loss] < loss[1], "loss " .. loss[1] .. " -> " .. loss[#loss])
end

return T
