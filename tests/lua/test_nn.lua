-- Tests of tpu.nn: layers, containers, parameters, printing, errors, and a tiny fit.
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local jacobian = require "jacobian"
local nn = tpu.nn

local T = {}

local function rand(shape, seed)
  return tpu.random.uniform(tpu.random.key(seed or 1), shape, {minval = -1, maxval = 1})
end

local function shape_str(t) return table.concat(t.shape, ",") end

-- A Dense(2 -> 3) with known weights.
local function known_dense(opts)
  local d = nn.Dense(3, opts)
  d(tpu.zeros({1, 2}))
  d:set_parameters {tpu.tensor {{1, 2, 3}, {4, 5, 6}}, tpu.tensor {0.5, -0.5, 0}}
  return d
end

function T.dense_builds_on_first_call()
  local d = nn.Dense(4)
  check.eq(d.built, false)
  local y = d(rand({2, 3}))
  check.eq(shape_str(y), "2,4")
  local p = d:parameters()
  check.eq(#p, 2)
  check.eq(shape_str(p[1]), "3,4")
  check.eq(shape_str(p[2]), "4")
  check.eq(d:count_params(), 16)
end

function T.dense_forward_values()
  local y = known_dense()(tpu.tensor {{1, 1}, {2, -1}}):totable()
  check.near(y[1][1], 5.5, 1e-5); check.near(y[1][2], 6.5, 1e-5); check.near(y[1][3], 9, 1e-5)
  check.near(y[2][1], -1.5, 1e-5); check.near(y[2][2], -1.5, 1e-5); check.near(y[2][3], 0, 1e-5)
end

function T.dense_activation_and_no_bias()
  local y = known_dense {activation = "relu"}(tpu.tensor {{2, -1}}):totable()
  check.near(y[1][1], 0, 1e-6); check.near(y[1][2], 0, 1e-6); check.near(y[1][3], 0, 1e-6)
  local d = nn.Dense(2, {use_bias = false})
  d(rand({1, 5}))
  check.eq(#d:parameters(), 1)
end

function T.dense_batched_input()
  local d = nn.Dense(3)
  check.eq(shape_str(d(rand({2, 4, 5}))), "2,4,3")
end

function T.dense_gradient_wrt_input()
  local d = nn.Dense(3)
  local x = rand({2, 4}, 7)
  d(x)
  check.near(jacobian.max_error(function(xx) return d(xx) end, x), 0, 1e-2)
end

function T.dense_gradient_wrt_weights()
  local d = nn.Dense(3, {activation = "tanh"})
  local x = rand({2, 4}, 8)
  d(x)
  local kernel, bias = table.unpack(d:parameters())
  local function with_kernel(k)
    d:set_parameters {k, bias}
    return d(x)
  end
  local function with_bias(b)
    d:set_parameters {kernel, b}
    return d(x)
  end
  check.near(jacobian.max_error(with_kernel, kernel), 0, 1e-2)
  check.near(jacobian.max_error(with_bias, bias), 0, 1e-2)
  d:set_parameters {kernel, bias}
end

function T.dense_argument_errors()
  check.raises(function() nn.Dense(0) end, "units must be a positive integer, got 0")
  check.raises(function() nn.Dense(-3) end, "got %-3")
  check.raises(function() nn.Dense(2.5) end, "got 2.5")
  check.raises(function() nn.Dense("10") end, 'got "10"')
  check.raises(function() nn.Dense(3, {activation = "relux"}) end,
    'unknown activation "relux" %(expected a function or one of: elu, exponential, gelu, gelu_approximate, hard_sigmoid, hard_silu, hard_swish, leaky_relu, linear')
  check.raises(function() nn.Dense(3, {activaton = "relu"}) end, "unknown option 'activaton'")
  check.raises(function() nn.Dense(3, {kernel_initializer = "glorot"}) end,
    'unknown initializer "glorot"')
  check.raises(function() nn.Dense(3, {dtype = "f16"}) end,
    'dtype must be "f32", "bf16", "float32" or "mixed_bfloat16", got "f16"')
end

function T.wrong_input_shape_names_layer_and_shape()
  local d = nn.Dense(4, {name = "probe"})
  d(rand({32, 784}))
  check.raises(function() d(rand({32, 100})) end,
    "Dense 'probe' expects input with last dimension 784, got f32%[32,100%]")
  check.raises(function() d(rand({784})) end, "at least 2 dimensions, got f32%[784%]")
end

function T.default_names_count_per_class()
  local a, b = nn.Dense(1), nn.Dense(1)
  local na, nb = tonumber(a.name:match("^dense_(%d+)$")), tonumber(b.name:match("^dense_(%d+)$"))
  check.eq(nb, na + 1)
  check.is_true(nn.Flatten().name:match("^flatten_%d+$") ~= nil)
end

function T.flatten_and_activation()
  check.eq(shape_str(nn.Flatten()(rand({4, 2, 3}))), "4,6")
  local y = nn.Activation("relu")(tpu.tensor {-1, 0, 2}):totable()
  check.near(y[1], 0, 0); check.near(y[3], 2, 0)
  local s = nn.Activation("softmax")(tpu.tensor {{1, 1}}):totable()
  check.near(s[1][1], 0.5, 1e-6)
  local sig = nn.Activation("sigmoid")(tpu.tensor {0}):totable()
  check.near(sig[1], 0.5, 1e-6)
  check.raises(function() nn.Activation("swishy") end, 'unknown activation "swishy"')
end

function T.sequential_parameters_in_layer_then_creation_order()
  local m = nn.Sequential {nn.Flatten(), nn.Dense(5), nn.Dense(2, {use_bias = false}), nn.Dense(3)}
  m(rand({2, 2, 2}))
  local shapes = {}
  for i, p in ipairs(m:parameters()) do shapes[i] = shape_str(p) end
  check.eq(table.concat(shapes, " "), "4,5 5 5,2 2,3 3")
end

function T.set_parameters_swaps_values()
  local m = nn.Sequential {nn.Dense(2), nn.Dense(1)}
  local x = rand({3, 4})
  m(x)
  local zeros = {}
  for i, p in ipairs(m:parameters()) do zeros[i] = tpu.zeros(p.shape) end
  m:set_parameters(zeros)
  check.near(m(x):abs():sum():item(), 0, 0)
  check.eq(m.modules[1].kernel, zeros[1])
  check.raises(function() m:set_parameters {zeros[1]} end, "set_parameters expects 4 tensors, got 1")
end

-- A layer that keeps a weight under a second field gets the new tensor in both; a frozen
-- child's weights walk as non-trainable, in parameters() order.
function T.set_parameters_updates_aliases_and_each_weight_walks_in_order()
  local Twice = nn.Module:extend("Twice")
  function Twice:build() self:add_weight {name = "w", shape = {2}}; self.alias = self.w end
  function Twice:call(x) return x * self.w + x * self.alias end
  local frozen = nn.Dense(1, {trainable = false})
  local m = nn.Sequential {Twice(), nn.Dense(2), frozen}
  m(rand({3, 2}))
  local new = {}
  for i, p in ipairs(m:parameters()) do new[i] = p + 1 end
  m:set_parameters(new)
  check.eq(m.modules[1].w, new[1])
  check.eq(m.modules[1].alias, new[1])
  check.eq(m.modules[3].bias, new[5])
  local walked = {}
  m:each_weight(function(layer, entry, trainable)
    walked[#walked + 1] = layer.__name .. "." .. entry.name .. (trainable and "" or "(frozen)")
    check.eq(entry.value, new[#walked])
  end)
  check.eq(table.concat(walked, " "), "Twice.w Dense.kernel Dense.bias Dense.kernel(frozen) Dense.bias(frozen)")
  check.eq(table.concat(m:_trainable_indices(), " "), "1 2 3")
  check.eq(#m:_weight_entries(), 5)
end

-- A built model whose first layer keeps its weight under a second field, its parameters and
-- new values for them.
local function model_with_alias()
  local Twice = nn.Module:extend("Twice")
  function Twice:build() self:add_weight {name = "w", shape = {2}}; self.alias = self.w end
  function Twice:call(x) return x * self.w + x * self.alias end
  local m = nn.Sequential {Twice(), nn.Dense(2)}
  m(rand({3, 2}))
  local own = m:parameters()
  local new = {}
  for i, p in ipairs(own) do new[i] = p + 1 end
  return m, own, new
end

-- set_parameters returns what it replaced; that list given back puts everything back, aliases
-- too, without walking again (a layer built in between keeps its new weight), and is still
-- checked for its length. Another model's list is walked for that model.
function T.set_parameters_returns_what_it_replaced()
  local m, own, new = model_with_alias()
  local replaced = m:set_parameters(new)
  for i = 1, #own do check.eq(replaced[i], own[i]) end
  local extra = m.modules[2]:add_weight {name = "extra", shape = {1}}
  local back = m:set_parameters(replaced)
  check.eq(m.modules[1].w, own[1])
  check.eq(m.modules[1].alias, own[1])
  check.eq(m.modules[2].kernel, own[2])
  check.eq(m.modules[2].extra, extra)
  for i = 1, #new do check.eq(back[i], new[i]) end
  check.eq(#m:parameters(), 4)
  check.raises(function() m:set_parameters(own) end, "set_parameters expects 4 tensors, got 3")
  table.remove(back)
  check.raises(function() m:set_parameters(back) end, "set_parameters expects 3 tensors, got 2")
  local other = model_with_alias()
  local from_m = m:set_parameters(m:parameters())
  check.raises(function() other:set_parameters(from_m) end, "set_parameters expects 3 tensors, got 4")
end

-- Lists given back and forth keep the aliases with their weights; a field pointed elsewhere in
-- between keeps what it holds.
function T.set_parameters_back_and_forth_keeps_aliases()
  local m, own, new = model_with_alias()
  local list = m:set_parameters(new)
  for _ = 1, 3 do
    list = m:set_parameters(list)
    check.eq(m.modules[1].alias, m.modules[1].w)
  end
  check.eq(m.modules[1].w, own[1])
  local elsewhere = rand({2})
  m.modules[1].alias = elsewhere
  m:set_parameters(list)
  check.eq(m.modules[1].w, new[1])
  check.eq(m.modules[1].alias, elsewhere)
end

-- A field a layer points at its weight inside call (here on its first call in training, which
-- the train step's trace makes) holds the real weight again once the step is traced, and
-- follows fit's updates.
function T.alias_made_inside_call_follows_the_weight()
  local Cached = nn.Module:extend("Cached")
  function Cached:build() self:add_weight {name = "w", shape = {2}, initializer = "ones"} end
  function Cached:call(x, ctx)
    if ctx and ctx.training then self.w_seen = self.w_seen or self.w end
    return x * (self.w_seen or self.w)
  end
  local layer = Cached()
  local model = nn.Sequential {layer}
  model:compile {optimizer = tpu.optim.SGD {lr = 0.1}, loss = "mse"}
  local x, y = rand({4, 2}), rand({4, 2})
  model:fit(tpu.data.from_tensors {x, y}:batch(4), {epochs = 2, verbose = 0})
  check.eq(layer.w_seen, layer.w)
  check.near(model(x):totable(), (x * layer.w):totable(), 1e-6)
  model:evaluate(tpu.data.from_tensors {x, y}:batch(4), {verbose = 0})
  check.eq(layer.w_seen, layer.w)
end

-- One tensor given for two weights of a layer: each field still follows its own weight after.
function T.set_parameters_with_one_tensor_twice_keeps_the_fields_apart()
  local ln = nn.LayerNorm()
  ln(tpu.ones {2, 4})
  local z = tpu.zeros {4}
  ln:set_parameters {z, z}
  check.eq(ln.gamma:totable(), {0, 0, 0, 0})
  check.eq(ln.beta:totable(), {0, 0, 0, 0})
  ln:set_parameters {tpu.full({4}, 1), tpu.full({4}, 2)}
  check.eq(ln.gamma:totable(), {1, 1, 1, 1})
  check.eq(ln.beta:totable(), {2, 2, 2, 2})
  check.eq(ln:parameters()[2], ln.beta)
end

function T.sequential_rejects_non_layers()
  check.raises(function() nn.Sequential {nn.Flatten(), 3} end, "layer 2 is not a layer")
  check.raises(function() nn.Sequential {nn.Flatten} end, "layer 1 is the class Flatten")
end

function T.tostring_is_a_tree()
  local m = nn.Sequential {nn.Flatten(), nn.Dense(4, {activation = "relu"}), nn.Dense(2)}
  check.eq(tostring(m), "nn.Sequential {\n  (1): nn.Flatten\n  (2): nn.Dense(? -> 4, relu)\n"
    .. "  (3): nn.Dense(? -> 2)\n}")
  m(rand({1, 3, 2}))
  check.eq(tostring(m.modules[2]), "nn.Dense(6 -> 4, relu)")
  local outer = nn.Sequential {m, nn.Activation("softmax")}
  check.eq(tostring(outer), "nn.Sequential {\n  (1): nn.Sequential {\n    (1): nn.Flatten\n"
    .. "    (2): nn.Dense(6 -> 4, relu)\n    (3): nn.Dense(4 -> 2)\n  }\n"
    .. "  (2): nn.Activation(softmax)\n}")
end

function T.initialization_is_deterministic_per_seed()
  local function weights(seed)
    nn.set_seed(seed)
    local d = nn.Dense(3)
    d(tpu.zeros({1, 4}))
    return d.kernel:reshape({-1}):totable()
  end
  local a, b, c = weights(5), weights(5), weights(6)
  local same, differ = true, false
  for i = 1, #a do
    same = same and a[i] == b[i]
    differ = differ or a[i] ~= c[i]
  end
  check.is_true(same, "same seed, same weights")
  check.is_true(differ, "another seed, other weights")
  check.raises(function() nn.set_seed(-1) end, "non%-negative integer, got %-1")
end

function T.glorot_uniform_stays_within_its_limit()
  local w = nn.initializers.glorot_uniform(tpu.random.key(3), {20, 30}, "f32")
  local limit = math.sqrt(6 / 50)
  check.is_true(w:abs():max():item() <= limit + 1e-6)
  check.is_true(w:abs():max():item() > limit / 2)
  check.near(nn.initializers.zeros(nil, {2}, "f32"):sum():item(), 0, 0)
end

-- Keras's variance scaling: a normal truncated at two of its (widened) standard deviations,
-- whose weights have the variance named (2 / fan_in for he_normal).
function T.variance_scaling_normals_are_truncated_as_keras_does()
  for name, sd in pairs {he_normal = math.sqrt(2 / 300), glorot_normal = math.sqrt(2 / 700),
                         lecun_normal = math.sqrt(1 / 300)} do
    local w = nn.initializers[name](tpu.random.key(4), {300, 400}, "f32")
    local bound = 2 * sd / 0.87962566103423978
    check.is_true(w:abs():max():item() <= bound * (1 + 1e-6), name .. " stays within 2 widened deviations")
    check.is_true(w:abs():max():item() > 0.95 * bound, name .. " reaches near the bound")
    check.near(w:square():mean():sqrt():item(), sd, 0.01 * sd, name .. "'s deviation")
  end
  local plain = nn.initializers.random_normal(tpu.random.key(4), {300, 400}, "f32")
  check.is_true(plain:abs():max():item() > 2.5 * 0.05, "random_normal is not truncated")
end

function T.custom_layer_with_add_weight()
  local Scale = nn.Module:extend("Scale")
  function Scale:build(input_shape)
    self:add_weight {name = "scale", shape = {input_shape[#input_shape]}, initializer = "ones"}
  end
  function Scale:call(x, _ctx) return x * self.scale end
  local s = Scale {name = "my_scale"}
  local y = s(tpu.tensor {{1, 2}})
  check.eq(s.name, "my_scale")
  check.near(y:sum():item(), 3, 1e-6)
  check.eq(#s:parameters(), 1)
  local m = nn.Sequential {Scale(), nn.Dense(1)}
  m(tpu.tensor {{1, 2}})
  check.eq(#m:parameters(), 3)
  check.eq(tostring(m.modules[1]), "nn.Scale")
end

function T.trainable_false_freezes_weights()
  local frozen = nn.Dense(2, {trainable = false})
  local m = nn.Sequential {frozen, nn.Dense(1)}
  m(rand({1, 3}))
  local idx = m:_trainable_indices()
  check.eq(table.concat(idx, ","), "3,4")
end

function T.summary_counts_parameters()
  local m = nn.Sequential {nn.Flatten(), nn.Dense(4), nn.Dense(2)}
  m(rand({1, 3, 2}))
  local text = require("tpu.nn.summary")(m)
  check.is_true(text:find("Total params: 38", 1, true) ~= nil, text)
  check.is_true(text:find("(None, 4)", 1, true) ~= nil, text)
end

-- A tiny linearly separable problem: the loss must drop and the history must fill in.
function T.fit_evaluate_predict_tiny()
  nn.set_seed(0)
  local x = tpu.tensor {{1, 0}, {0, 1}, {1, 0.2}, {0.1, 1}, {0.9, 0}, {0, 0.8}, {1, 0.1}, {0.2, 0.9}}
  local y = tpu.tensor({0, 1, 0, 1, 0, 1, 0, 1}, {dtype = "i32"})
  local m = nn.Sequential {nn.Dense(2)}
  m:compile {optimizer = tpu.optim.SGD {lr = 0.5}, loss = "sparse_categorical_crossentropy",
             metrics = {"accuracy"}}
  local h = m:fit({x, y}, {epochs = 5, batch_size = 4, verbose = 0, validation_data = {x, y}})
  local loss = h.history.loss
  check.eq(#loss, 5)
  check.is_true(loss[5] < loss[1], "loss decreases")
  check.eq(#h.history.val_accuracy, 5)
  local r = m:evaluate({x, y}, {verbose = 0})
  check.near(r.accuracy, 1, 1e-6)
  check.is_true(r.loss < loss[1])
  check.eq(shape_str(m:predict(x)), "8,2")
  check.eq(shape_str(m:predict({x}, {batch_size = 3})), "8,2")
end

function T.fit_requires_compile()
  local m = nn.Sequential {nn.Dense(2)}
  check.raises(function() m:fit({tpu.zeros({2, 2}), tpu.zeros({2}, {dtype = "i32"})}) end,
    "must be compiled before fit")
  check.raises(function() m:compile {optimizer = "adamx", loss = "mse"} end, 'unknown optimizer "adamx"')
  check.raises(function() m:compile {optimizer = "adam", loss = "hinge"} end, 'unknown loss "hinge"')
  check.raises(function() m:compile {optimizer = "adam", loss = "mse", metrics = {"f1"}} end,
    'unknown metric "f1"')
end

-- Keras tracks layer-valued attributes: sublayers held in fields (or lists in fields) are the
-- layer's children, in the order the fields were set, after those listed in self.modules.
function T.sublayers_in_fields_are_tracked()
  local Net = nn.Module:extend("FieldNet")
  function Net:__init(o)
    self:init_common(o or {})
    self.d1 = nn.Dense(8)
    self.blocks = {nn.Dense(4), nn.Dense(4)}
    self.d2 = nn.Dense(1)
  end
  function Net:call(x, ctx)
    x = self.d1(x, ctx)
    for _, b in ipairs(self.blocks) do x = b(x, ctx) end
    return self.d2(x, ctx)
  end
  local net = Net()
  local x = rand({16, 3})
  net(x)
  check.eq(#net.modules, 4)
  check.eq({net.modules[1], net.modules[2], net.modules[3], net.modules[4]},
           {net.d1, net.blocks[1], net.blocks[2], net.d2})
  check.eq({net:count_params()}, {(3 * 8 + 8) + (8 * 4 + 4) + (4 * 4 + 4) + 5, 93, 0})
  check.eq(net:named_parameters()[1].name, "1.kernel")
  net:compile {optimizer = "adam", loss = "mse"}
  local h = net:fit(x, x:sum(2, true), {epochs = 3, verbose = 0})
  check.is_true(h.history.loss[3] < h.history.loss[1], "fit trains the sublayers")
  -- A sublayer both listed in self.modules and held in a field counts once; a back reference
  -- to a container is not a sublayer.
  local Both = nn.Module:extend("Both")
  function Both:__init()
    self:init_common({})
    self.inner = nn.Dense(2)
    self.modules[#self.modules + 1] = self.inner
    self.extra = nn.Dense(2)
  end
  function Both:call(x, ctx) return self.extra(self.inner(x, ctx), ctx) end
  local both = Both()
  both(rand({1, 2}))
  check.eq(#both.modules, 2)
  check.eq(both:count_params(), 12)
  both.inner.owner = both
  check.eq(both:count_params(), 12)
end

-- A layer may return a table of tensors keyed by names (Keras's dict outputs), nested too;
-- nil or a table holding something else than tensors is an error naming the layer.
function T.a_layer_may_return_a_table_of_tensors_keyed_by_names()
  local Heads = nn.Module:extend("Heads")
  function Heads:call(v) return {double = v * 2, pair = {v, v + 1}} end
  local y = Heads()(tpu.tensor {1, 2})
  check.eq(y.double:totable(), {2, 4})
  check.eq(y.pair[2]:totable(), {2, 3})
  local Bad = nn.Module:extend("Bad")
  function Bad:call(v) return {out = v, n = 3} end
  check.raises(function() Bad {name = "bad"}(tpu.tensor {1}) end, "n=3")
  check.raises(function() Bad {name = "bad"}(tpu.tensor {1}) end,
    "}; call(x, ctx) must return the output tensor (or a list of tensors, or a table of them keyed by names)")
  local Empty = nn.Module:extend("Empty")
  function Empty:call() return {} end
  check.raises(function() Empty {name = "empty"}(tpu.tensor {1}) end, "Empty 'empty': call returned")
end

-- A layer held by two owners (shared weights) counts once, as in Keras: parameters,
-- count_params, named_parameters (so save), set_parameters and the optimizer see it at its
-- first place.
function T.a_layer_held_by_two_owners_counts_once()
  local Block = nn.Module:extend("SharedBlock")
  function Block:__init(d) self:init_common({}); self.d = d end
  function Block:call(x) return self.d(x) end
  local Parent = nn.Module:extend("SharedParent")
  function Parent:__init()
    self:init_common({})
    local shared = nn.Dense(2)
    self.a, self.b = Block(shared), Block(shared)
  end
  function Parent:call(x) return self.b(self.a(x)) end
  local p = Parent()
  p(tpu.ones {1, 2})
  check.eq(#p:parameters(), 2)
  check.eq({p:count_params()}, {6, 6, 0})
  local names = {}
  for i, w in ipairs(p:named_parameters()) do names[i] = w.name end
  check.eq(names, {"1.1.kernel", "1.1.bias"})
  local old = p:set_parameters({tpu.zeros {2, 2}, tpu.ones {2}})
  check.eq(#old, 2)
  check.eq(p(tpu.ones {1, 2}):totable(), {{1, 1}})
  -- A custom layer keeping a reference to another layer of a functional model.
  local Wrap = nn.Module:extend("RefWrap")
  function Wrap:__init(d) self:init_common({}); self.inner = d end
  function Wrap:call(x) return x + 1 end
  local inp = nn.Input {shape = {2}}
  local d = nn.Dense(2)
  local m = nn.Model {inputs = inp, outputs = Wrap(d)(d(inp))}
  check.eq(#m:parameters(), 2)
  check.eq(m:count_params(), 6)
  check.eq(m:named_parameters()[1].name, "1.kernel")
  check.eq(#m:named_parameters(), 2)
  m:compile {optimizer = "adam", loss = "mse"}
  m:fit(tpu.ones {4, 2}, tpu.ones {4, 2}, {epochs = 1, verbose = 0})
  local path = files.tmpname()
  m:save(path)
  local saved = 0
  for _ in pairs(tpu.load(path)) do saved = saved + 1 end
  os.remove(path)
  check.eq(saved, 2)
end

-- A field that already existed (set to false in __init, to a layer in build) and a table of
-- layers keyed by names are tracked too: assignment order first, then the others by key name;
-- a field set with rawset is not.
function T.existing_and_dict_fields_are_tracked()
  local Net = nn.Module:extend("LateFieldNet")
  function Net:__init()
    self:init_common({})
    self.proj = false
    self.heads = {b = nn.Dense(2), a = nn.Dense(2)}
    self.first = nn.Dense(3)
    rawset(self, "hidden", nn.Dense(5))
  end
  function Net:build(shape)
    self.proj = nn.Dense(3)
  end
  function Net:call(x)
    local h = self.proj(self.first(x))
    return self.heads.a(h) + self.heads.b(h)
  end
  local net = Net()
  net(tpu.ones {1, 2})
  check.eq(#net.modules, 4)
  check.is_true(net.modules[1] == net.heads.a and net.modules[2] == net.heads.b, "dict: by key name")
  check.is_true(net.modules[3] == net.first and net.modules[4] == net.proj, "late field last")
  check.eq(net:count_params(), (2 * 3 + 3) + (3 * 3 + 3) + 2 * (3 * 2 + 2))
end

return T
