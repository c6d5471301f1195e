-- Tests of conv2d, max_pool2d, avg_pool2d (against plain-Lua loops, gradients against finite
-- differences) and of random keys as traced tensors (jit draws equal eager draws).
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"

local T = {}

local function rand(shape, seed)
  return tpu.random.uniform(tpu.random.key(seed), shape, {minval = -1, maxval = 1})
end

-- Distinct values 0.1 apart in a shuffled order: no near-ties for max pooling.
local function distinct(shape, seed)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local order = tpu.random.uniform(tpu.random.key(seed), {n}):totable()
  local idx = {}
  for i = 1, n do idx[i] = i end
  table.sort(idx, function(a, b) return order[a] < order[b] end)
  local v = {}
  for i = 1, n do v[idx[i]] = (i - n / 2) * 0.1 end
  return tpu.tensor(v):reshape(shape)
end

-- First padding row and output size along one dim for "same" (ceil(n / s) outputs, the extra
-- padding row at the end) and "valid" (full windows only).
local function geometry(n, k, s, d, mode)
  local span = (k - 1) * d + 1
  if mode == "valid" then return 0, (n - span) // s + 1 end
  local out = (n + s - 1) // s
  return math.max((out - 1) * s + span - n, 0) // 2, out
end

-- y[b][oh][ow][o] by the definition, on nested tables.
local function ref_conv(x, w, s, mode, d)
  local H, W, C = #x[1], #x[1][1], #x[1][1][1]
  local KH, KW, O = #w, #w[1], #w[1][1][1]
  local ph, OH = geometry(H, KH, s, d, mode)
  local pw, OW = geometry(W, KW, s, d, mode)
  local y = {}
  for b = 1, #x do
    y[b] = {}
    for oh = 1, OH do
      y[b][oh] = {}
      for ow = 1, OW do
        local out = {}
        for o = 1, O do
          local acc = 0
          for i = 1, KH do
            for j = 1, KW do
              local ih, iw = (oh - 1) * s + (i - 1) * d - ph + 1, (ow - 1) * s + (j - 1) * d - pw + 1
              if ih >= 1 and ih <= H and iw >= 1 and iw <= W then
                for c = 1, C do acc = acc + x[b][ih][iw][c] * w[i][j][c][o] end
              end
            end
          end
          out[o] = acc
        end
        y[b][oh][ow] = out
      end
    end
  end
  return y
end

-- Max or average over each window (padding left out of both).
local function ref_pool(x, k, s, mode, kind)
  local H, W, C = #x[1], #x[1][1], #x[1][1][1]
  local ph, OH = geometry(H, k, s, 1, mode)
  local pw, OW = geometry(W, k, s, 1, mode)
  local y = {}
  for b = 1, #x do
    y[b] = {}
    for oh = 1, OH do
      y[b][oh] = {}
      for ow = 1, OW do
        local out = {}
        for c = 1, C do
          local best, sum, count = -math.huge, 0, 0
          for i = 1, k do
            for j = 1, k do
              local ih, iw = (oh - 1) * s + i - ph, (ow - 1) * s + j - pw
              if ih >= 1 and ih <= H and iw >= 1 and iw <= W then
                local v = x[b][ih][iw][c]
                best, sum, count = math.max(best, v), sum + v, count + 1
              end
            end
          end
          out[c] = kind == "max" and best or sum / count
        end
        y[b][oh][ow] = out
      end
    end
  end
  return y
end

function T.conv2d_matches_the_definition()
  local x, w = rand({2, 5, 6, 3}, 1), rand({3, 2, 3, 4}, 2)
  for _, c in ipairs {{"same", 1, 1}, {"valid", 1, 1}, {"same", 2, 1}, {"valid", 2, 1}, {"same", 1, 2}, {"valid", 2, 2}} do
    local mode, s, d = c[1], c[2], c[3]
    local y = x:conv2d(w, {padding = mode, strides = s, dilation = d})
    check.near(y:totable(), ref_conv(x:totable(), w:totable(), s, mode, d), 1e-4, mode .. " stride " .. s .. " dilation " .. d)
  end
  local y = tpu.conv2d(x, w, {padding = {{1, 1}, {0, 1}}})
  check.eq(y.shape, {2, 5, 6, 4})
end

-- groups = G: the conv of each group of channels by its slice of the filter, concatenated.
function T.grouped_conv2d_is_one_conv_per_group()
  local x = rand({2, 6, 5, 6}, 11)
  for _, c in ipairs {{3, 6, {padding = "same"}}, {6, 12, {strides = 2, padding = "same"}}, {2, 4, {dilation = 2}}} do
    local groups, out, opts = c[1], c[2], c[3]
    local w = rand({3, 3, 6 // groups, out}, 12)
    opts.groups = groups
    local parts, cg, og = {}, 6 // groups, out // groups
    for g = 1, groups do
      local xg = x:slice {{1, 2}, {1, 6}, {1, 5}, {(g - 1) * cg + 1, g * cg}}
      local wg = w:slice {{1, 3}, {1, 3}, {1, cg}, {(g - 1) * og + 1, g * og}}
      parts[g] = xg:conv2d(wg, {padding = opts.padding, strides = opts.strides, dilation = opts.dilation})
    end
    check.near(x:conv2d(w, opts):totable(), tpu.concat(parts, -1):totable(), 1e-5, "groups " .. groups)
  end
end

function T.grouped_conv2d_gradients_match_finite_differences()
  local x, w = rand({1, 5, 4, 4}, 13), rand({3, 3, 1, 8}, 14)
  for _, opts in ipairs {{padding = "same", strides = 2, groups = 4}, {padding = "valid", groups = 2},
                         {padding = "same", dilation = 2, groups = 4}} do
    local ww = opts.groups == 2 and rand({3, 3, 2, 8}, 15) or w
    check.near(jacobian.max_error(function(v) return v:conv2d(ww, opts) end, x), 0, 1e-2, "input")
    check.near(jacobian.max_error(function(v) return x:conv2d(v, opts) end, ww), 0, 1e-2, "filter")
  end
end

-- The transposed conv by its definition: input element i adds x[i] * w[k] at output
-- i * stride + k - pad_lo, where pad_lo is the padding of the conv that maps the output's
-- shape back to the input's (Keras's "same": half the total, the odd one at the end).
local function ref_conv_transpose(x, w, s, mode, oh, ow)
  local H, W, C = #x[1], #x[1][1], #x[1][1][1]
  local KH, KW, O = #w, #w[1], #w[1][1]
  local function pad(n, k, len)
    if mode == "valid" then return 0 end
    return math.max(((len + s - 1) // s - 1) * s + k - len, 0) // 2
  end
  local ph, pw = pad(H, KH, oh), pad(W, KW, ow)
  local y = {}
  for b = 1, #x do
    y[b] = {}
    for i = 1, oh do
      y[b][i] = {}
      for j = 1, ow do y[b][i][j] = {} for o = 1, O do y[b][i][j][o] = 0 end end
    end
    for ih = 1, H do
      for iw = 1, W do
        for i = 1, KH do
          for j = 1, KW do
            local yh, yw = (ih - 1) * s + i - ph, (iw - 1) * s + j - pw
            if yh >= 1 and yh <= oh and yw >= 1 and yw <= ow then
              for o = 1, O do
                for c = 1, C do y[b][yh][yw][o] = y[b][yh][yw][o] + x[b][ih][iw][c] * w[i][j][o][c] end
              end
            end
          end
        end
      end
    end
  end
  return y
end

-- Output sizes as Keras's Conv2DTranspose gives them, values by the definition.
function T.conv2d_transpose_matches_keras_shapes_and_the_definition()
  local x = rand({2, 4, 3, 3}, 16)
  for _, c in ipairs {{3, 2, "same", nil, 8, 6}, {3, 2, "valid", nil, 9, 7}, {3, 2, "valid", 1, 10, 8},
                      {4, 2, "same", nil, 8, 6}, {3, 1, "same", nil, 4, 3}, {2, 3, "valid", nil, 12, 9},
                      {3, 2, "same", 0, 7, 5}} do
    local k, s, mode, extra, oh, ow = table.unpack(c, 1, 6)
    local w = rand({k, k, 5, 3}, 17)
    local y = x:conv2d_transpose(w, {strides = s, padding = mode, output_padding = extra})
    local what = k .. "x" .. k .. " stride " .. s .. " " .. mode .. " output_padding " .. tostring(extra)
    check.eq(y.shape, {2, oh, ow, 5}, what)
    check.near(y:totable(), ref_conv_transpose(x:totable(), w:totable(), s, mode, oh, ow), 1e-4, what)
  end
  -- Keras: Conv2DTranspose(16, 3, strides=2, padding="same") on 7x7 -> 14x14; "valid" -> 15x15.
  check.eq(tpu.zeros {1, 7, 7, 2}:conv2d_transpose(tpu.zeros {3, 3, 16, 2}, {strides = 2, padding = "same"}).shape, {1, 14, 14, 16})
  check.eq(tpu.zeros {1, 7, 7, 2}:conv2d_transpose(tpu.zeros {3, 3, 16, 2}, {strides = 2}).shape, {1, 15, 15, 16})
end

function T.conv2d_transpose_gradients_match_finite_differences()
  local x, w = rand({1, 3, 4, 2}, 18), rand({3, 2, 3, 2}, 19)
  for _, opts in ipairs {{padding = "same", strides = 2}, {padding = "valid", strides = 2, output_padding = 1}, {}} do
    check.near(jacobian.max_error(function(v) return v:conv2d_transpose(w, opts) end, x), 0, 1e-2, "input")
    check.near(jacobian.max_error(function(v) return x:conv2d_transpose(v, opts) end, w), 0, 1e-2, "filter")
  end
end

function T.grouped_and_transposed_conv_errors_name_the_line()
  local x = rand({1, 5, 5, 6}, 20)
  local err = check.raises(function() return x:conv2d(rand({3, 3, 1, 4}, 1), {groups = 4}) end,
                           "conv2d: the input's 6 channels do not split into groups = 4")
  check.is_true(err:find("^[^:]*test_conv%.lua:%d+: ") ~= nil, err)
  check.raises(function() return x:conv2d(rand({3, 3, 3, 4}, 1), {groups = 3}) end,
               "conv2d: the filter must have 2 input channels (6 channels in 3 groups), got f32[3,3,3,4]")
  check.raises(function() return x:conv2d(rand({3, 3, 2, 4}, 1), {groups = 3}) end,
               "conv2d: the filter's 4 output channels do not split into groups = 3")
  check.raises(function() return x:conv2d(rand({3, 3, 0, 4}, 1), {groups = 12}) end,
               "conv2d: the input's 6 channels do not split into groups = 12")
  check.raises(function() return x:conv2d_transpose(rand({3, 3, 4, 6}, 1), {strides = 1 << 40}) end,
               "conv2d_transpose: kernel sizes, strides and dilations must be at most 1048576")
  check.raises(function() return x:conv2d(rand({3, 3, 6, 4}, 1), {groups = 0}) end,
               "conv2d: groups must be a positive integer, got 0")
  check.raises(function() return x:conv2d_transpose(rand({3, 3, 4, 6}, 1), {strides = 2, output_padding = 2}) end,
               "conv2d_transpose: output_padding must be a non-negative integer or pair of them below the strides (2x2), got 2")
  check.raises(function() return x:conv2d_transpose(rand({3, 3, 6, 4}, 1)) end,
               "conv2d_transpose: the filter must be a rank-4 tensor [height, width, out_channels, in_channels] with the input's 6 channels last")
  check.raises(function() return x:conv2d_transpose(rand({3, 3, 4, 6}, 1), {padding = {{1, 1}, {1, 1}}}) end,
               "conv2d_transpose: padding must be \"valid\" or \"same\"")
end

function T.pools_match_the_definition()
  local x = rand({2, 5, 7, 3}, 3)
  for _, c in ipairs {{2, 2, "valid"}, {3, 2, "same"}, {2, 1, "same"}, {3, 3, "valid"}} do
    local k, s, mode = c[1], c[2], c[3]
    local opts = {pool_size = k, strides = s, padding = mode}
    local what = k .. "x" .. k .. " stride " .. s .. " " .. mode
    check.near(x:max_pool2d(opts):totable(), ref_pool(x:totable(), k, s, mode, "max"), 1e-6, "max " .. what)
    check.near(x:avg_pool2d(opts):totable(), ref_pool(x:totable(), k, s, mode, "avg"), 1e-5, "avg " .. what)
  end
  check.eq(x:max_pool2d().shape, {2, 2, 3, 3})  -- pool_size 2, strides = pool_size
end

function T.conv2d_gradients_match_finite_differences()
  local x, w = rand({1, 4, 5, 2}, 4), rand({3, 2, 2, 3}, 5)
  for _, opts in ipairs {{padding = "same", strides = 2}, {padding = "valid"}, {padding = "same", dilation = 2}} do
    check.near(jacobian.max_error(function(xx) return xx:conv2d(w, opts) end, x), 0, 1e-2, "input")
    check.near(jacobian.max_error(function(ww) return x:conv2d(ww, opts) end, w), 0, 1e-2, "filter")
  end
end

function T.pool_gradients_match_finite_differences()
  local x = distinct({1, 5, 4, 2}, 6)
  for _, opts in ipairs {{pool_size = 2}, {pool_size = 3, strides = 2, padding = "same"}} do
    check.near(jacobian.max_error(function(v) return v:max_pool2d(opts) end, x), 0, 1e-2, "max")
    check.near(jacobian.max_error(function(v) return v:avg_pool2d(opts) end, x), 0, 1e-2, "avg")
  end
end

function T.conv_net_trains_inside_jit()
  local x, w = rand({2, 6, 6, 1}, 7), rand({3, 3, 1, 4}, 8)
  local loss = function(ww) return x:conv2d(ww, {padding = "same"}):relu():max_pool2d():square():mean() end
  local eager = tpu.grad(loss)(w)
  local jitted = tpu.jit(function(ww) return tpu.grad(loss)(ww) end)(w)
  check.near(jitted:totable(), eager:totable(), 1e-5)
end

function T.conv2d_and_pool_errors_name_the_line()
  local x = rand({1, 5, 5, 3}, 9)
  local err = check.raises(function() return x:conv2d(rand({3, 3, 1, 2}, 1)) end,
                           "conv: input has 3 channels but the filter expects 1")
  check.is_true(err:find("^[^:]*test_conv%.lua:%d+: ") ~= nil, err)
  check.raises(function() return rand({5, 5, 3}, 1):conv2d(rand({3, 3, 3, 2}, 1)) end, "rank-4 NHWC tensor")
  -- conv's shape rule gives the text (the binding keeps no copy of the check)
  check.raises(function() return x:conv2d(rand({7, 7, 3, 2}, 1)) end,
               "conv: the 7x7 window does not fit the 5x5 input f32[1,5,5,3]; use padding = \"same\" or a smaller window")
  check.raises(function() return x:conv2d(rand({3, 3, 3, 2}, 1), {dilation = 3, padding = {{1, 0}, {0, 0}}}) end,
               "conv: the 3x3 window (dilated to 7x7) does not fit the 5x5 input f32[1,5,5,3] (padded to 6x5);")
  check.raises(function() return x:max_pool2d{pool_size = 7} end,
               "max_pool2d: the 7x7 window does not fit the 5x5 input with padding \"valid\"")
  check.raises(function() return x:max_pool2d{padding = "full"} end, "padding must be \"valid\", \"same\"")
  check.raises(function() return x:avg_pool2d{pool_size = 0} end, "pool_size must be a positive integer")
end

function T.random_draws_in_jit_equal_eager_draws()
  local key = tpu.random.key(7)
  local function draws(k, step)
    local k1, k2 = table.unpack(k:split(2))
    local kf = k:fold_in(step)
    return {tpu.random.uniform(k1, {3, 4}, {minval = -2, maxval = 3}),
            tpu.random.normal(k2, {5}, {mean = 1, stddev = 2}),
            tpu.random.normal(kf, {6}, {truncated = true}),
            tpu.random.bernoulli(kf, 0.3, {8}):cast("i32")}, k1
  end
  local f = tpu.jit(draws)
  local traced, k1 = f(key, tpu.tensor(5, {dtype = "i32"}))
  local eager, e1 = draws(key, 5)
  for i = 1, #eager do check.eq(traced[i]:totable(), eager[i]:totable(), "draw " .. i) end
  check.is_true(tpu.random.is_key(k1) and k1 == e1)
  f(key, tpu.tensor(6, {dtype = "i32"}))
  check.eq(f:stats().compiles, 1)  -- the step is a traced argument, not a new signature
  check.eq(tpu.random.key(tpu.tensor(7, {dtype = "i32"})), key)
end

function T.random_distributions()
  local k = tpu.random.key(3)
  local u = tpu.random.uniform(k, {20000})
  check.is_true(u:min():item() >= 0 and u:max():item() < 1)
  local z = tpu.random.normal(k, {20000}, {truncated = true})
  check.is_true(z:abs():max():item() <= 2)
  check.near(tpu.random.bernoulli(k, 0.25, {20000}):cast("f32"):mean():item(), 0.25, 0.02)
  check.raises(function() tpu.random.uniform(tpu.zeros({3}), {2}) end, "expected a key from tpu.random.key(seed), got f32[3]")
end

return T
