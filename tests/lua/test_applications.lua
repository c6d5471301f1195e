-- tpu.applications: small configurations train through compile + fit (one step on random
-- data), their outputs have the shapes their arguments ask for, and the weight names are
-- Keras's (so model:load reads a file written with those names).
local tpu = require "tpu"
local check = require "check"
local apps, optim, nn = tpu.applications, tpu.optim, tpu.nn

local T = {}

local function one_step(model, size, classes)
  model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy",
                 metrics = {"accuracy"}}
  local x = tpu.random.uniform(tpu.random.key(1), {4, size, size, 3})
  local y = tpu.tensor({0, 1, 2, classes - 1}, {dtype = "i32"})
  local before = model.layers[#model.layers]:parameters()[1]:sum():item()
  local history = model:fit(x, y, {epochs = 1, batch_size = 4, verbose = 0})
  local loss = history.history.loss[1]
  -- finite and sane: within 3 times chance's log(classes). Each test builds its model after
  -- nn.set_seed(0), so its weights do not depend on the keys the tests before it used (with
  -- those, EfficientNet's classifier, Keras's fan_out/3 Dense on 1280 batch-normalized features,
  -- started some runs with logits of std 6 to 8 and a first loss above 10). At seed 0 the first
  -- losses are 1.4 to 1.8, ResNet50's 4.0 (chance: 1.39 at 4 classes, 2.30 at 10).
  check.is_true(loss == loss and loss > 0 and loss < 3 * math.log(classes), "loss " .. loss)
  check.is_true(model.layers[#model.layers]:parameters()[1]:sum():item() ~= before, "the step updated the weights")
end

function T.resnet50_trains_one_step_at_32x32()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  local model = apps.ResNet50 {input_shape = {32, 32, 3}, classes = 10}
  check.eq(model.output_shape, {-1, 10})
  one_step(model, 32, 10)
end

function T.alexnet_trains_one_step_at_64x64()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  one_step(apps.AlexNet {input_shape = {64, 64, 3}, classes = 5}, 64, 5)
end

function T.mobilenet_v2_trains_one_step_at_32x32()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  one_step(apps.MobileNetV2 {input_shape = {32, 32, 3}, classes = 4}, 32, 4)
end

function T.xception_trains_one_step_at_71x71()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  one_step(apps.Xception {input_shape = {71, 71, 3}, classes = 4}, 71, 4)
end

function T.efficientnet_b0_trains_one_step_at_32x32()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  local model = apps.EfficientNetB0 {input_shape = {32, 32, 3}, classes = 4}
  local norm = model.layers[2]
  norm:adapt(tpu.random.uniform(tpu.random.key(2), {8, 32, 32, 3}, {maxval = 255}) / 255)
  local mean = norm.mean:totable()
  one_step(model, 32, 4)
  check.near(norm.mean:totable(), mean, 0)  -- non-trainable: the step leaves it
end

function T.nasnet_mobile_trains_one_step_at_32x32()
  nn.set_seed(0)  -- the initializers' keys: the same in any test order
  one_step(apps.NASNetMobile {input_shape = {32, 32, 3}, classes = 4}, 32, 4)
end

-- The layers Keras's source leaves unnamed get the names of a fresh Keras session, so weight
-- files written with Keras's names load; each build counts from zero again.
function T.nasnet_names_the_unnamed_layers_as_keras()
  for _ = 1, 2 do
    local model = apps.NASNetMobile {include_top = false, input_shape = {32, 32, 3}}
    local names = {}
    for i = 1, 5 do names[i] = model.layers[i].name end
    check.eq(names, {"stem_conv1", "stem_bn1", "activation", "reduction_conv_1_stem_1", "reduction_bn_1_stem_1"})
    check.eq(model.layers[#model.layers].name, "activation_187")
    check.eq(model.layers[#model.layers - 1].name, "normal_concat_12")
  end
end

function T.features_without_top_have_the_asked_shapes()
  check.eq(apps.VGG16 {include_top = false, input_shape = {32, 32, 3}}.output_shape, {-1, 1, 1, 512})
  check.eq(apps.VGG16 {include_top = false, pooling = "avg", input_shape = {64, 64, 3}}.output_shape, {-1, 512})
  check.eq(apps.AlexNet {include_top = false, pooling = "max", input_shape = {63, 63, 3}}.output_shape, {-1, 256})
end

function T.keras_layer_names()
  local model = apps.ResNet50 {input_shape = {32, 32, 3}, classes = 3, name = "r"}
  check.eq(model.name, "r")
  local names = {}
  for i = 1, 6 do names[i] = model.layers[i].name end
  check.eq(names, {"conv1_pad", "conv1_conv", "conv1_bn", "conv1_relu", "pool1_pad", "pool1_pool"})
  check.eq(model.layers[#model.layers].name, "predictions")
  check.eq(model.layers[3].epsilon, 1.001e-5)
end

-- The standard deviation of a tensor's elements.
local function std(t)
  local d = t - t:mean():item()
  return math.sqrt((d * d):mean():item())
end

-- The standard deviations of a model's kernels and embeddings (the weights with at least two
-- axes), in order: {{"layer/sublayer class/weight name", std}, ...}.
local function kernel_stds(model)
  local out = {}
  for _, layer in ipairs(model.layers) do
    layer:each_weight(function(owner, entry)
      if #entry.value.shape >= 2 then
        out[#out + 1] = {layer.name .. "/" .. owner.__name .. "/" .. entry.name, std(entry.value)}
      end
    end)
  end
  return out
end

-- Hugging Face's BERT draws every Linear weight and every embedding from N(0, 0.02): the
-- encoder blocks', the pooler's and the classifier's kernels too (not glorot_uniform).
function T.bert_kernels_have_std_002()
  local bert = apps.BertBase {vocab_size = 300, max_length = 16, num_layers = 1, hidden_dim = 64,
                              num_heads = 2, intermediate_dim = 128, num_classes = 3}
  local stds = kernel_stds(bert)
  for _, e in ipairs(stds) do check.near(e[2], 0.02, 0.003, e[1]) end
  check.eq(#stds, 11)  -- 3 embeddings, 4 attention kernels, 2 feed-forward, pooler, classifier
end

-- Hugging Face's nn.Embedding(padding_idx = 0) starts the padding token's row at zeros.
function T.bert_padding_token_embedding_starts_at_zero()
  local bert = apps.BertBase {vocab_size = 50, max_length = 8, num_layers = 1, hidden_dim = 16,
                              num_heads = 2, intermediate_dim = 32}
  local table_ = bert:get_layer("token_embedding").embeddings
  check.eq(table_:slice({{1, 1}}):abs():sum():item(), 0)
  check.near(std(table_:slice({{2, 50}})), 0.02, 0.004)
  local one = apps.BertBase {vocab_size = 1, max_length = 8, num_layers = 1, hidden_dim = 16,
                             num_heads = 2, intermediate_dim = 32}
  check.eq(one:get_layer("token_embedding").embeddings:totable(), {tpu.zeros({16}):totable()})
end

-- Hugging Face's GPT-2 draws each block's residual output projections (c_proj: attention output
-- and feed-forward output) with std 0.02 / sqrt(2 * n_layer), every other kernel with 0.02.
function T.gpt2_residual_projections_have_scaled_std()
  local gpt = apps.GPT2Small {vocab_size = 200, max_length = 16, num_layers = 2, hidden_dim = 64,
                              num_heads = 2, intermediate_dim = 128}
  local names, scaled = {}, 0.02 / math.sqrt(4)
  for _, e in ipairs(kernel_stds(gpt)) do
    local i = #names + 1
    names[i] = e[1]
    -- per block: query, key, value, output kernels, then the feed-forward in and out
    local k = (i - 3) % 6
    local residual = e[1]:match("^transformer_layer") and (k == 3 or k == 5)
    check.near(e[2], residual and scaled or 0.02, residual and 0.0015 or 0.003, e[1])
  end
  check.eq(#names, 14)  -- 2 embeddings, 6 kernels per block
  check.eq(names[6], "transformer_layer_1/MultiHeadAttention/output_kernel")
  check.eq(names[8], "transformer_layer_1/Dense/kernel")
end

-- A GPT-2 language model at a size where the step's fusions run in lock-step (a LayerNorm
-- gradient's fusion, read by a sum and by a fusion deferred to a later run, was scheduled after
-- the sum, which read a value never made: the first step crashed) trains on a tpu.data pipeline.
function T.gpt2_trains_next_token_prediction_through_a_pipeline()
  local N, LENGTH = 32, 128
  local tokens = (tpu.random.uniform(tpu.random.key(3), {N, LENGTH + 1}) * 100):cast("i32")
  local ids, next_ids = tokens:slice {{1, N}, {1, LENGTH}}, tokens:slice {{1, N}, {2, LENGTH + 1}}
  local gpt = apps.GPT2Small {vocab_size = 100, max_length = LENGTH, num_layers = 1, hidden_dim = 128,
                              num_heads = 2, intermediate_dim = 512, logits = true}
  gpt:compile {optimizer = optim.Adam {lr = 1e-3},
               loss = tpu.losses.SparseCategoricalCrossentropy {from_logits = true}}
  local batches = tpu.data.from_tensors {{ids, tpu.ones({N, LENGTH}, {dtype = "i32"})}, next_ids}
    :batch(16, {drop_remainder = true})
  local history = gpt:fit(batches, {epochs = 2, verbose = 0})
  local loss = history.history.loss
  check.eq(#loss, 2)
  check.is_true(loss[1] > 4 and loss[1] < 5.5, "the first epoch's loss is about log(100): " .. loss[1])
  check.is_true(loss[2] < loss[1], "the loss falls")
end

-- Keras's NASNet gives its 1x1 convolutions (the cells' squeeze, the adjust block's projections)
-- he_normal kernels: std sqrt(2 / fan_in). glorot_uniform's is sqrt(fan_in / (fan_in + fan_out))
-- of that: 0.93 for a normal cell's squeeze (6x as many inputs as outputs), less for the others.
function T.nasnet_1x1_convolutions_are_he_normal()
  local model = apps.NASNetMobile {include_top = false, input_shape = {32, 32, 3}}
  local n = 0
  for _, layer in ipairs(model.layers) do
    local name = layer.name
    if name:match("^normal_conv_1_") or name:match("^reduction_conv_1_") or name:match("^adjust_conv") then
      local k = layer.kernel
      local fan_in = k.shape[1] * k.shape[2] * k.shape[3]
      if k:numel() >= 4096 then
        n = n + 1
        check.near(std(k) / math.sqrt(2 / fan_in), 1, 0.04, name)
      end
    end
  end
  check.is_true(n > 20, n .. " convolutions checked")
end

-- classifier_activation = false is Keras's None: the classifier gives logits, not softmax.
function T.classifier_activation_false_gives_logits()
  local function last(act)
    local model = apps.MobileNetV2 {input_shape = {32, 32, 3}, classes = 3, classifier_activation = act}
    return model:get_layer("predictions").activation_name
  end
  check.eq(last(false), "linear")
  check.eq(last(nil), "softmax")
  check.eq(last("linear"), "linear")
end

-- Without the top, Keras names the pooling "avg_pool" / "max_pool" only in ResNet and
-- EfficientNet; VGG16, Xception, MobileNetV2 and NASNet leave it unnamed (a fresh session's name).
function T.headless_pooling_layers_have_keras_names()
  local function last(builder, pooling, size)
    local model = builder {include_top = false, pooling = pooling, input_shape = {size, size, 3}}
    return model.layers[#model.layers].name
  end
  check.eq(last(apps.MobileNetV2, "avg", 32), "global_average_pooling2d")
  check.eq(last(apps.MobileNetV2, "max", 32), "global_max_pooling2d")
  check.eq(last(apps.EfficientNetB0, "avg", 32), "avg_pool")
  check.eq(last(apps.EfficientNetB0, "max", 32), "max_pool")
end

-- Keras's headless models take any image size; here the default size is fixed (static graphs),
-- and the error for another size says to build with input_shape.
function T.default_size_model_error_suggests_input_shape()
  local model = apps.MobileNetV2 {include_top = false}
  check.raises(function() model(tpu.zeros({1, 32, 32, 3})) end,
    "expects input 'input_%d+' of shape %(None, 224, 224, 3%), got f32%[1,32,32,3%]; built without "
    .. "input_shape, the model takes 224x224 images only: build it with input_shape = ")
  local sized = apps.MobileNetV2 {include_top = false, input_shape = {64, 64, 3}}
  local ok, err = pcall(sized, tpu.zeros({1, 32, 32, 3}))
  check.is_true(not ok and not err:find("input_shape", 1, true), err)
end

return T
