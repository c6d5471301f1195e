-- Tests of the mixed_bfloat16 policy: which layers compute in bf16 (read off the traced graph of
-- a jitted train step), the per-layer dtype override, f32 variables, losses and metrics, a small
-- model training to nearly its f32 loss, the --bf16 / TPUTRAIN_BF16 switches and the errors.
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local nn_check = require "nn_check"
local nn, optim, losses, metrics = tpu.nn, tpu.optim, tpu.losses, tpu.metrics
local mp = tpu.mixed_precision
local rand = nn_check.rand

local T = {}

-- The policy the run started with (mixed_bfloat16 under --bf16 / TPUTRAIN_BF16=1).
local initial = mp.policy().name

-- Runs fn with the policy `name` set for the layers it constructs; restores the initial one.
local function with_policy(name, fn)
  mp.set_policy(name)
  local ok, err = pcall(fn)
  mp.set_policy(initial)
  if not ok then error(err, 0) end
end

local function mixed(fn) return function() with_policy("mixed_bfloat16", fn) end end

-- The top-level nodes of a graph text: list of {id=, op=, dtype=, shape=, args = {ids}}, and
-- the same nodes by id.
local function parse(text)
  local nodes, by_id = {}, {}
  for line in text:gmatch("[^\n]+") do
    local id, op, dtype, shape, rest = line:match("^%%(%d+) = (%S+) (%w+)%[([%d,]*)%](.*)$")
    if id then
      local n = {id = tonumber(id), op = op, dtype = dtype, shape = shape, args = {}}
      for a in (rest:match("^([^#{]*)") or ""):gmatch("%%(%d+)") do n.args[#n.args + 1] = tonumber(a) end
      nodes[#nodes + 1], by_id[n.id] = n, n
    end
  end
  return nodes, by_id
end

-- Operand dtypes of node n, "bf16,bf16".
local function operand_types(n, by_id)
  local t = {}
  for i, a in ipairs(n.args) do t[i] = by_id[a].dtype end
  return table.concat(t, ",")
end

-- Nodes of op `op` (and output shape "4,32" when given), each as "dtype[shape](operand types)".
local function ops(text, op, shape)
  local nodes, by_id = parse(text)
  local out = {}
  for _, n in ipairs(nodes) do
    if n.op == op and (not shape or n.shape == shape) then
      out[#out + 1] = string.format("%s[%s](%s)", n.dtype, n.shape, operand_types(n, by_id))
    end
  end
  table.sort(out)
  return out
end

-- Graph text of a jitted train step of model on (x, labels): loss and gradients with respect
-- to every parameter, as fit differentiates them.
local function step_text(model, x, y)
  model(x)
  local p0 = model:parameters()
  local function loss_of(params, xb, yb)
    model:set_parameters(params)
    local loss = losses.sparse_categorical_crossentropy(yb, model(xb, {training = true}), {from_logits = true})
    model:set_parameters(p0)
    return loss
  end
  local step = tpu.jit(function(params, xb, yb) return tpu.value_and_grad(loss_of)(params, xb, yb) end,
                       {name = "mixed_precision_step"})
  return step:lower(p0, x, y), step, p0
end

local function labels(n, classes, seed)
  return (rand({n}, seed) * 1000):abs():cast("i32") % classes
end

function T.policy_follows_the_command_line_and_can_be_set()
  check.eq(initial, tpu.options.bf16 and "mixed_bfloat16" or "float32")
  with_policy("mixed_bfloat16", function()
    check.eq(mp.policy(), {name = "mixed_bfloat16", compute_dtype = "bf16", variable_dtype = "f32"})
  end)
  with_policy("float32", function()
    check.eq(mp.policy(), {name = "float32", compute_dtype = "f32", variable_dtype = "f32"})
  end)
  check.eq(mp.policy().name, initial)
end

T["Dense computes on bf16 operands with f32 sums; a dtype = f32 layer stays f32"] = mixed(function()
  local model = nn.Sequential {nn.Dense(32, {activation = "relu"}), nn.Dense(10, {dtype = "f32"})}
  local text = step_text(model, rand({4, 8}, 1), labels(4, 10, 2))
  -- the input and the first kernel rounded to bf16 for the first layer
  local converts = ops(text, "convert")
  check.is_true(#ops(text, "convert", "4,8") >= 1 and ops(text, "convert", "4,8")[1]:match("^bf16") ~= nil,
    "input cast to bf16: " .. check.show(converts))
  check.eq(ops(text, "convert", "8,32")[1], "bf16[8,32](f32)", "kernel cast to bf16")
  -- first layer: forward dot and kernel gradient on bf16 operands, summed in f32
  check.eq(ops(text, "dot", "8,32"), {"f32[8,32](bf16,bf16)"}, text)
  check.is_true(#ops(text, "dot", "4,32") >= 1, text)
  for _, d in ipairs(ops(text, "dot", "4,32")) do
    -- [4,32]: the first layer's output, and the input gradient of the second (f32) layer
    check.is_true(d == "f32[4,32](bf16,bf16)" or d == "f32[4,32](f32,f32)", d)
  end
  check.is_true(ops(text, "dot", "4,32")[1] == "f32[4,32](bf16,bf16)", text)
  -- the f32 logits layer: every dot on f32 operands, no bf16 copy of its kernel
  check.eq(ops(text, "dot", "4,10"), {"f32[4,10](f32,f32)"}, text)
  check.eq(ops(text, "dot", "32,10"), {"f32[32,10](f32,f32)"}, text)
  check.eq(ops(text, "convert", "32,10"), {}, "no bf16 copy of the f32 layer's kernel")
  -- the loss the step returns is f32
  local _, by_id = parse(text)
  local ret = text:match("\nreturn %%(%d+)")
  check.eq(by_id[tonumber(ret)].dtype .. "[" .. by_id[tonumber(ret)].shape .. "]", "f32[]")
end)

T["under float32 no bf16 value appears in the step"] = function()
  with_policy("float32", function()
    local model = nn.Sequential {nn.Dense(32, {activation = "relu"}), nn.Dense(10)}
    local text = step_text(model, rand({4, 8}, 1), labels(4, 10, 2))
    check.is_true(text:find("bf16", 1, true) == nil, text)
  end)
end

T["a layer reads the policy when it is constructed"] = function()
  local before, after
  with_policy("float32", function() before = nn.Dense(5) end)
  with_policy("mixed_bfloat16", function()
    after = nn.Dense(5)
    check.eq(before:compute_dtype(), "f32")
  end)
  check.eq(after:compute_dtype(), "bf16")
  check.eq(after:variable_dtype(), "f32")
  local x = rand({2, 3}, 4)
  check.eq(before(x).dtype, "f32")
  check.eq(after(x).dtype, "f32", "outputs of a mixed layer are f32 (its bf16 products summed in f32)")
  check.eq(after.kernel.dtype, "f32")
  local text = tpu.jit(function(v) return after(v) end, {name = "after"}):lower(x)
  check.eq(ops(text, "dot"), {"f32[2,5](bf16,bf16)"}, text)
end

-- Layers without a matmul or convolution compute and give f32 under mixed_bfloat16 (they gave
-- bf16: 5001.5 came out 4992 from Rescaling, 1000.5 came out 1000 from a bilinear upsampling).
T["Rescaling and bilinear UpSampling2D stay f32 under mixed_bfloat16"] = mixed(function()
  local y = nn.Rescaling(1, {offset = 5000})(tpu.tensor {{1.5}, {3.25}})
  check.eq(y.dtype, "f32")
  check.eq(y:totable(), {{5001.5}, {5003.25}})
  local up = nn.UpSampling2D({1, 2}, {interpolation = "bilinear"})(tpu.tensor {{{{1000.5}, {1001.5}}}})
  check.eq(up.dtype, "f32")
  check.near(up:reshape {4}:totable(), {1000.5, 1000.75, 1001.25, 1001.5}, 1e-3)
  check.eq(nn.Rescaling(0.5, {dtype = "bf16"})(tpu.tensor {{3}}).dtype, "bf16", "a bf16 layer gives bf16")
end)

T["per-layer dtype: f32, bf16 and the policy names"] = function()
  with_policy("mixed_bfloat16", function()
    check.eq(nn.Dense(2, {dtype = "f32"}):compute_dtype(), "f32")
    check.eq(nn.Dense(2, {dtype = "float32"}):compute_dtype(), "f32")
    local pure = nn.Dense(2, {dtype = "bf16"})
    local x = rand({3, 4}, 5)
    check.eq(pure(x).dtype, "bf16", "a bf16 layer gives bf16")
    check.eq(pure.kernel.dtype, "bf16", "and keeps bf16 variables")
  end)
  local m = nn.Dense(2, {dtype = "mixed_bfloat16"})
  check.eq({m:compute_dtype(), m:variable_dtype()}, {"bf16", "f32"})
end

function T.dtype_errors_name_the_users_line()
  local line = debug.getinfo(1, "l").currentline + 1
  local msg = check.raises(function() nn.Dense(3, {dtype = "f16"}) end, "test_mixed_precision.lua:")
  check.is_true(msg:find("test_mixed_precision.lua:" .. line .. ": Dense: dtype must be \"f32\", "
    .. "\"bf16\", \"float32\" or \"mixed_bfloat16\", got \"f16\"", 1, true) ~= nil, msg)
  line = debug.getinfo(1, "l").currentline + 1
  msg = check.raises(function() nn.Conv2D(4, 3, {dtype = 16}) end, "dtype must be")
  check.is_true(msg:find("test_mixed_precision.lua:" .. line .. ": Conv2D: dtype must be", 1, true) ~= nil, msg)
  line = debug.getinfo(1, "l").currentline + 1
  msg = check.raises(function() mp.set_policy("mixed_float16") end, "unknown mixed-precision policy")
  check.is_true(msg:find("test_mixed_precision.lua:" .. line .. ": unknown mixed-precision policy "
    .. "\"mixed_float16\" (expected \"float32\" or \"mixed_bfloat16\")", 1, true) ~= nil, msg)
  check.eq(mp.policy().name, initial, "a refused policy leaves the current one")
  -- matmul's result type is checked by the dot row's shape rule, eagerly and when traced
  local x = rand({2, 3}, 5)
  local want = "f32[2,3], f32[3,2] cannot produce bf16 (the result is the operands' type, or f32 for bf16 operands)"
  line = debug.getinfo(1, "l").currentline + 1
  msg = check.raises(function() return x:matmul(x:transpose(), {to = "bf16"}) end, want)
  check.is_true(msg:find("test_mixed_precision.lua:" .. line .. ":", 1, true) ~= nil, msg)
  check.raises(function() return tpu.jit(function(a) return a:matmul(a:transpose(), {to = "bf16"}) end)(x) end, want)
  check.eq(x:cast("bf16"):matmul(x:transpose():cast("bf16"), {to = "f32"}).dtype, "f32")
end

T["fit keeps the variables f32 and the loss f32"] = mixed(function()
  nn.set_seed(3)
  local model = nn.Sequential {nn.Dense(16, {activation = "relu"}), nn.BatchNorm(), nn.Dense(3)}
  local x, y = rand({32, 6}, 6), labels(32, 3, 7)
  model:compile {optimizer = optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy",
                 metrics = {"accuracy"}}
  local h = model:fit({x, y}, {batch_size = 16, epochs = 2, verbose = 0})
  for _, p in ipairs(model:parameters()) do check.eq(p.dtype, "f32") end
  check.eq(math.type(h.history.loss[2]), "float")
  local logits = model(x)
  check.eq(logits.dtype, "f32")
  check.eq(losses.sparse_categorical_crossentropy(y, logits:cast("bf16"), {from_logits = true}).dtype, "f32")
  check.eq(metrics.accuracy(y, logits:cast("bf16")).dtype, "f32")
  check.near(metrics.accuracy(y, logits:cast("bf16")):item(), metrics.accuracy(y, logits):item(), 0.07)
end)

T["a small model trains to nearly its f32 loss"] = function()
  local x = rand({256, 16}, 11)
  local teacher = rand({16, 4}, 12)
  local y = x:matmul(teacher):argmax(-1):cast("i32")
  local function train(policy)
    local result
    with_policy(policy, function()
      nn.set_seed(5)
      local model = nn.Sequential {nn.Dense(64, {activation = "relu"}), nn.Dense(4)}
      model:compile {optimizer = optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy",
                     metrics = {"accuracy"}}
      model:fit({x, y}, {batch_size = 32, epochs = 8, verbose = 0})
      result = model:evaluate({x, y}, {verbose = 0})
      result.weights = model:parameters()
    end)
    return result
  end
  local f32, bf16 = train("float32"), train("mixed_bfloat16")
  check.is_true(f32.loss < 0.5, "the f32 model learns: loss " .. f32.loss)
  check.near(bf16.loss, f32.loss, 0.05 + 0.1 * f32.loss, "bf16 loss vs f32 loss")
  check.near(bf16.accuracy, f32.accuracy, 0.03)
  local differs = false
  for i, w in ipairs(bf16.weights) do
    check.eq(w.dtype, "f32")
    if (w - f32.weights[i]):abs():max():item() > 0 then differs = true end
  end
  check.is_true(differs, "the bf16 run really computed in bf16")
end

-- Gradients of a mixed layer against an f32 twin with the same weights: close (bf16 operands
-- give about 3 significant digits), and f32 for the f32 variables.
local function twin_gradients(make, x, tol)
  local f32_layer, mixed_layer
  with_policy("float32", function() f32_layer = make() end)
  with_policy("mixed_bfloat16", function() mixed_layer = make() end)
  f32_layer(x)
  mixed_layer(x)
  mixed_layer:set_parameters(f32_layer:parameters())
  local function grads(layer)
    local p0 = layer:parameters()
    local g = tpu.grad(function(params)
      layer:set_parameters(params)
      local y = layer(x)
      layer:set_parameters(p0)
      return (y:cast("f32") * y:cast("f32")):sum()
    end)(p0)
    return g, layer(x)
  end
  local g32, y32 = grads(f32_layer)
  local gmp, ymp = grads(mixed_layer)
  check.eq(ymp.dtype, "f32", mixed_layer.__name .. " output")
  local scale = y32:abs():max():item()
  check.is_true((ymp - y32):abs():max():item() <= tol * scale, mixed_layer.__name .. " output near f32")
  -- errors against the largest gradient: some are ~0 in exact arithmetic (MultiHeadAttention's
  -- key bias, which the softmax ignores) and left with rounding noise only
  local s = 0
  for _, g in ipairs(g32) do s = math.max(s, g:abs():max():item()) end
  for i, g in ipairs(gmp) do
    check.eq(g.dtype, "f32")
    local err = (g - g32[i]):abs():max():item()
    check.is_true(err <= tol * s, string.format("%s gradient %d: error %g of %g",
      mixed_layer.__name, i, err, s))
  end
  return mixed_layer
end

T["Conv2D computes on bf16 operands with f32 sums, gradients reach the f32 variables"] = function()
  local x = rand({2, 6, 6, 3}, 21)
  local layer = twin_gradients(function() return nn.Conv2D(4, 3, {activation = "relu"}) end, x, 0.03)
  local text = tpu.jit(function(v) return layer(v) end, {name = "conv"}):lower(x)
  -- both operands rounded to bf16, then the f32 conv sums their exact products
  check.eq(ops(text, "conv"), {"f32[2,4,4,4](f32,f32)"}, text)
  local _, rounded = text:gsub("= convert bf16%[", "")  -- the input's (the kernel's folds)
  check.is_true(rounded >= 1, text)
  -- the same numbers as the engine's bf16 conv with an f32 sum: compare with it directly
  local xb, kb = x:cast("bf16"), layer.kernel:cast("bf16")
  local want = xb:cast("f32"):conv2d(kb:cast("f32")) + layer.bias
  check.near(layer(x):totable(), want:relu():totable(), 0)
end

T["MultiHeadAttention and TransformerEncoder matmuls compute in bf16"] = function()
  local x = rand({2, 5, 8}, 31)
  local attn = twin_gradients(function() return nn.MultiHeadAttention {num_heads = 2, key_dim = 4} end,
    x, 0.05)
  local text = tpu.jit(function(v) return attn(v) end, {name = "attn"}):lower(x)
  local dots = ops(text, "dot")
  check.eq(#dots, 4, text)  -- query, key, value, output
  for _, d in ipairs(dots) do check.is_true(d:match("^f32%[.*%]%(bf16,bf16%)$") ~= nil, d) end
  -- scores, softmax and weights x values: one op on the bf16 heads (f32 inside, rounded once)
  check.eq(ops(text, "attention"), {"bf16[2,2,5,4](bf16,bf16,bf16)"}, text)
  local enc = twin_gradients(function()
    return nn.TransformerEncoder {num_heads = 2, intermediate_dim = 16}
  end, x, 0.05)
  check.eq(enc.ffn_in:compute_dtype(), "bf16")
  check.eq(enc.attention:compute_dtype(), "bf16")
  text = tpu.jit(function(v) return enc(v) end, {name = "encoder"}):lower(x)
  dots = ops(text, "dot")
  check.eq(#dots, 6, text)  -- the attention's 4 and the feed-forward's 2
  for _, d in ipairs(dots) do check.is_true(d:match("^f32%[.*%]%(bf16,bf16%)$") ~= nil, d) end
  -- LayerNorm statistics in f32: every reduce of the encoder is f32
  for _, r in ipairs(ops(text, "reduce")) do check.is_true(r:match("^f32") ~= nil, r) end
end

T["Embedding keeps f32 rows under the policy; a dtype = f32 encoder stays f32"] = mixed(function()
  local emb = nn.Embedding(10, 4)
  local ids = tpu.tensor({{1, 2}, {3, 9}}, {dtype = "i32"})
  check.eq(emb(ids).dtype, "f32")
  check.eq(emb.embeddings.dtype, "f32")
  local enc = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8, dtype = "f32"}
  local x = rand({1, 3, 4}, 41)
  check.eq(enc(x).dtype, "f32")
  check.eq(enc.ffn_in:compute_dtype(), "f32")
  local text = tpu.jit(function(v) return enc(v) end, {name = "f32_encoder"}):lower(x)
  check.is_true(text:find("bf16", 1, true) == nil, text)
end)

T["BatchNorm and LayerNorm compute statistics in f32 on bf16 inputs"] = mixed(function()
  local bn, ln = nn.BatchNorm {momentum = 0}, nn.LayerNorm()
  local x = rand({8, 4}, 51, 3, 2):cast("bf16")
  local ctx = {training = true, updates = {}}
  local y = bn(x, ctx)
  check.eq(y.dtype, "f32")
  for _, v in pairs(ctx.updates) do check.eq(v.dtype, "f32") end
  local xf = x:cast("f32")
  check.near(y:mean(1):totable(), {0, 0, 0, 0}, 1e-5)
  check.near(ln(x):totable(), nn.LayerNorm()(xf):totable(), 1e-5)
  check.eq(bn.moving_mean.dtype, "f32")
end)

-- The interpreter running this suite (arg[-1]) started on a tiny script.
local function policy_of_run(prefix, flags)
  local interp = arg and arg[-1]
  if not interp then return nil end
  local script = files.tmpname(".lua")
  local f = assert(io.open(script, "w"))
  f:write('print(require("tpu").mixed_precision.policy().name)\n')
  f:close()
  local p = assert(io.popen(prefix .. " '" .. interp .. "' " .. flags .. " '" .. script .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(script)
  return (out:gsub("%s+$", ""))
end

T["--bf16 and TPUTRAIN_BF16=1 set the mixed_bfloat16 policy"] = function()
  if not (arg and arg[-1]) then return end
  check.eq(policy_of_run("TPUTRAIN_BF16=", ""), "float32")
  check.eq(policy_of_run("TPUTRAIN_BF16=", "--bf16"), "mixed_bfloat16")
  check.eq(policy_of_run("TPUTRAIN_BF16=1", ""), "mixed_bfloat16")
  check.eq(policy_of_run("TPUTRAIN_BF16=0", ""), "float32")
end

return T
