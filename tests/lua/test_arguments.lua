-- Every public function checks its arguments (DESIGN section 3: "every function takes its
-- documented arguments and nothing else"). The functions are listed from the modules
-- themselves, so a new one cannot escape: each needs an entry below, with a call that works;
-- the test then replaces each argument in turn by a value no function takes (a coroutine),
-- adds one argument more than documented, and puts an unknown key into its option table, and
-- expects each to raise an error located at the call in this file. A function that legitimately takes anything is an exception with a reason.
local tpu = require "tpu"
local check = require "check"
local data_util = require "data_util"
local is_namespace = require "namespace"

local T = {}

local nn, data = tpu.nn, tpu.data
local bad = coroutine.create(function() end)  -- a value of a type no function takes

local x = tpu.ones {2, 3}
local img = tpu.ones {1, 4, 4, 1}
local filter = tpu.ones {2, 2, 1, 1}
local ids = tpu.tensor({0, 2}, {dtype = "i32"})
local mask = tpu.tensor({true, false}, {dtype = "bool"})
local key = tpu.random.key(1)
local function id(v) return v end
local ds = data.range(4)

-- The table of calls, with the files the data sources read in `dir`.
local function make_specs(dir)
  local csv = data_util.write(dir .. "/a.csv", "a,b\n1,2\n3,4\n")
  local txt = data_util.write(dir .. "/a.txt", "one\ntwo\n")
  local npy = dir .. "/a.npy"
  data_util.write_npy(npy, "<f4", "(2,)", string.pack("<ff", 1, 2))
  local safetensors = dir .. "/a.safetensors"
  tpu.save(safetensors, {w = x})
  os.execute("mkdir -p " .. dir .. "/pics/a")
  local png = dir .. "/pics/a/p.png"
  tpu.image.write_png(png, tpu.ones({2, 2, 1}, {dtype = "u8"}))

  -- name -> {args..., opts = position of the option table, any = {positions taking anything},
  -- run = false when the working call has effects a test must not have}; or a string: the
  -- reason the function takes any value.
  local specs = {}

  specs.tpu = {
    abs = {x}, add = {x, 1}, all_reduce = {x, "sum"}, arange = {3, opts = 2}, argmax = {x, opts = 2},
    avg_pool2d = {img, opts = 2}, boolean_mask = {x, mask}, cast = {x, "i32"},
    class = {"Thing"}, concat = {{x, x}, 1}, cond = {tpu.tensor(true), id, id, x, any = {4, 5}},
    conv2d = {img, filter, opts = 3}, conv2d_transpose = {img, filter, opts = 3}, div = {x, 2}, eq = {x, x}, exp = {x}, full = {{2}, 1, opts = 3},
    erf = {x}, ge = {x, x}, gelu = {x, opts = 2}, grad = {id, opts = 2}, gt = {x, x},
    hard_sigmoid = {x}, hard_silu = {x}, hard_swish = {x}, relu6 = {x}, silu = {x}, swish = {x},
    elu = {x, opts = 2}, leaky_relu = {x, opts = 2}, mish = {x}, selu = {x}, softplus = {x}, softsign = {x},
    is_tensor = {x, any = {1}},  -- a predicate: true for a tensor, false for anything else
    is_traced = {x, any = {1}},  -- a predicate: true for a traced tensor, false for anything else
    item = {tpu.tensor(1)}, jit = {id, opts = 2}, le = {x, x}, load = {safetensors, opts = 2},
    log = {x}, log_softmax = {x, opts = 2}, lt = {x, x}, matmul = {x, x:transpose(), opts = 3},
    max = {x, opts = 2}, max_pool2d = {img, opts = 2}, maximum = {x, 1}, mean = {x, opts = 2},
    memory_stats = {}, min = {x, opts = 2}, minimum = {x, 1}, mul = {x, 1}, ne = {x, x}, neg = {x},
    nonzero = {mask}, numel = {x}, one_hot = {ids, 3, opts = 3}, ones = {{2}, opts = 2}, pow = {x, 2},
    relu = {x}, reset = {run = false}, reshape = {x, {3, 2}}, rsqrt = {x},
    save = {dir .. "/b.safetensors", {w = x}, {note = "x"}}, scope = {"probe", run = false},
    shape_dtype = {{2}, "f32"}, sigmoid = {x}, slice = {x, {{1, 1}}}, softmax = {x, opts = 2},
    sqrt = {x}, square = {x}, stack = {{x, x}, 1}, stop_gradient = {x}, sub = {x, 1}, sum = {x, opts = 2},
    take = {x, ids:slice {{1, 1}}, 1}, tanh = {x}, tensor = {{1, 2}, opts = 2}, totable = {x},
    transpose = {x, {2, 1}}, unique = {ids}, value_and_grad = {id, opts = 2},
    warn = {"", run = false}, where = {tpu.tensor({true, false, true}, {dtype = "bool"}), x, x}, zeros = {{2}, opts = 2},
  }

  -- Tensor methods: the same functions as tpu.*, called as t:name(...).
  specs.tensor = {}
  for name in pairs(tpu.core.Tensor) do specs.tensor[name] = specs.tpu[name] end

  local function dense() return nn.Dense(2) end
  local input = nn.Input {shape = {3}}
  specs.nn = {
    Activation = {"relu", opts = 2}, Add = {opts = 1}, AvgPool2D = {opts = 1}, BatchNorm = {opts = 1},
    Concatenate = {opts = 1}, Conv1D = {2, 3, opts = 3}, Conv2D = {2, 3, opts = 3},
    Conv2DTranspose = {2, 3, opts = 3}, DepthwiseConv2D = {3, opts = 2}, Dense = {2, opts = 2}, Dropout = {0.5, opts = 2},
    Embedding = {10, 4, opts = 3}, Flatten = {opts = 1}, GlobalAvgPool2D = {opts = 1},
    GlobalAveragePooling2D = {opts = 1}, GlobalMaxPool2D = {opts = 1}, GlobalMaxPooling2D = {opts = 1},
    ZeroPadding2D = {opts = 1}, Cropping2D = {opts = 1}, Rescaling = {0.5, opts = 2}, Normalization = {opts = 1},
    History = "created by fit for its result, not by users",
    Input = {{shape = {3}}, opts = 1}, LayerNorm = {opts = 1}, MaxPool2D = {opts = 1},
    Model = {{inputs = input, outputs = nn.Dense(2)(input)}, opts = 1},
    Module = "the base class of layers: users extend it (nn.Module:extend) rather than call it",
    MultiHeadAttention = {{num_heads = 2, key_dim = 2}, opts = 1},
    Progbar = "fit's progress bar, created by fit",
    Multiply = {opts = 1}, PositionEmbedding = {{sequence_length = 4}, opts = 1},
    TransformerDecoder = {{num_heads = 2, intermediate_dim = 4}, opts = 1},
    Reshape = {{3, 2}, opts = 2}, SeparableConv2D = {2, 3, opts = 3}, Sequential = {{dense()}, opts = 1},
    TransformerEncoder = {{num_heads = 2, intermediate_dim = 4}, opts = 1}, UpSampling2D = {2, opts = 2}, set_seed = {1, run = false},
    AveragePooling2D = {opts = 1}, BatchNormalization = {opts = 1}, Convolution1D = {2, 3, opts = 3},
    Convolution2D = {2, 3, opts = 3}, Convolution2DTranspose = {2, 3, opts = 3}, LayerNormalization = {opts = 1},
    MaxPooling2D = {opts = 1}, SeparableConvolution2D = {2, 3, opts = 3},
    ReLU = {opts = 1}, LeakyReLU = {opts = 1}, ELU = {opts = 1}, Softmax = {opts = 1},
    MaxPool1D = {opts = 1}, AvgPool1D = {opts = 1}, MaxPooling1D = {opts = 1}, AveragePooling1D = {opts = 1},
    GlobalAvgPool1D = {opts = 1}, GlobalMaxPool1D = {opts = 1}, GlobalAveragePooling1D = {opts = 1},
    GlobalMaxPooling1D = {opts = 1},
    Layer = "Keras's name of nn.Module, the base class of layers: users extend it rather than call it",
    ["initializers.constant"] = {0.5}, ["initializers.get"] = {"zeros", "Dense: kernel_initializer"},
    ["initializers.glorot_normal"] = {key, {2, 2}, "f32"}, ["initializers.glorot_uniform"] = {key, {2, 2}, "f32"},
    ["initializers.he_normal"] = {key, {2, 2}, "f32"}, ["initializers.he_uniform"] = {key, {2, 2}, "f32"},
    ["initializers.lecun_normal"] = {key, {2, 2}, "f32"}, ["initializers.random_normal"] = {key, {2, 2}, "f32"},
    ["initializers.random_uniform"] = {key, {2, 2}, "f32"},
    ["initializers.ones"] = {key, {2}, "f32", any = {1}}, ["initializers.zeros"] = {key, {2}, "f32", any = {1}},
    ["initializers.seed"] = {},
    ["initializers.set_seed"] = {1, run = false},
    enable_flash_attention = {run = false}, disable_flash_attention = {run = false}, is_flash_attention_enabled = {},
    ["regularizers.get"] = {"l2", "Dense: kernel_regularizer"},
    ["regularizers.is_regularizer"] = "a predicate: true for a regularizer, false for anything else",
    ["regularizers.l1"] = {0.1}, ["regularizers.l2"] = {0.1}, ["regularizers.l1_l2"] = {{l1 = 0.1}, opts = 1},
  }

    specs.data = {
    Dataset = "the base class of data sets, made by the sources below",
    Vocabulary = {{"a", "b"}, opts = 2}, csv = {csv, opts = 2}, fashion_mnist = {"test", {dir = dir}, opts = 2, run = false},
    fortunes = {txt}, from_tensors = {{x}}, from_tensor_slices = {{x}}, generator = {function() return function() end end},
    idx = {dir .. "/images", dir .. "/labels", run = false}, npy = {npy}, range = {3},
    text_lines = {txt}, text_records = {txt, opts = 2}, image_folder = {dir .. "/pics", {verbose = false}, opts = 2},
  }

  specs.dataset = {
    batch = {2, opts = 2}, cache = {}, cardinality = {}, cycle = {2}, element_spec = {},
    filter = {function() return true end}, iter = {opts = 1}, map = {id, opts = 2},
    padded_batch = {2, opts = 2}, prefetch = {2}, prefetch_stats = {}, shard = {2, 1}, shuffle = {4, opts = 2},
    skip = {1}, take = {1},
  }

  specs.optim = {
    Adam = {opts = 1}, AdamW = {opts = 1}, Optimizer = "the base class of optimizers",
    RMSprop = {opts = 1}, SGD = {opts = 1}, get = {"adam"},
    ["schedule.cosine"] = {{lr = 0.1, decay_steps = 10}, opts = 1},
    ["schedule.exponential"] = {{lr = 0.1, decay_steps = 10, decay_rate = 0.9}, opts = 1},
    ["schedule.warmup"] = {{lr = 0.1, warmup_steps = 10}, opts = 1},
    ["schedule.is_schedule"] = "a predicate: true for a schedule, false for anything else",
  }

  local y, p = tpu.tensor({1, 0}, {dtype = "i32"}), tpu.tensor {{0.2, 0.8}, {0.6, 0.4}}
  specs.losses = {
    BinaryCrossentropy = {opts = 1}, CategoricalCrossentropy = {opts = 1}, MeanSquaredError = {opts = 1}, Huber = {opts = 1},
    MeanAbsoluteError = {opts = 1}, KLDivergence = {opts = 1},
    SparseCategoricalCrossentropy = {opts = 1},
    binary_crossentropy = {p, p, opts = 3}, categorical_crossentropy = {p, p, opts = 3},
    mae = {p, p}, mean_absolute_error = {p, p}, huber = {p, p, opts = 3}, kl_divergence = {p, p}, kld = {p, p},
    get = {"mse"}, mean_squared_error = {p, p}, mse = {p, p}, match_targets = {"mse", p, p},
    per_example = "a lookup: the per-example form of a built-in loss, nil for anything else",
    sparse_categorical_crossentropy = {y, p, opts = 3},
  }

  specs.metrics = {
    accuracy = {y, p}, define = {{name = "probe", partial = function() end}}, get = {"accuracy"},
    mse = {p, p}, top_k_accuracy = {y, p}, Perplexity = {opts = 1}, perplexity = {y, p},
    mean_squared_error = {p, p}, mae = {p, p}, mean_absolute_error = {p, p},
    sparse_categorical_accuracy = {y, p}, binary_accuracy = {p, p}, categorical_accuracy = {p, p},
  }

  specs.random = {
    bernoulli = {key, 0.5, {2}}, bits = {key, {2}},
    is_key = "a predicate: true for a key, false for anything else",
    key = {1}, normal = {key, {2}, opts = 3}, uniform = {key, {2}, opts = 3},
  }

  specs.strategy = {
    PerReplica = "made by strategy:run for its per-replica results",
    Strategy = {{cores = 1}, opts = 1}, TPU = {{cores = 1}, opts = 1}, all_reduce = {x, "sum"},
    auto = {}, current = {}, default = {},
    multi_worker = {opts = 1, run = false},  -- the working call would start MPI in this process
  }

  local log = data_util.write(dir .. "/log.csv", "epoch,loss\n1,0.5\n2,0.25\n")
  local history = tpu.plot.read_csv(log)
  specs.plot = {
    csv = {log, dir .. "/p.svg", opts = 3}, history = {history, dir .. "/h.svg", opts = 3},
    read_csv = {log}, svg = {history, opts = 2},
  }

  specs.mixed_precision = {
    set_policy = {"float32"}, policy = {},
    layer_policy = "layers call it with their dtype option; it returns nil and a message for the layer to raise",
  }

  local state = {model = {w = x}, step = 3}
  tpu.checkpoint.save(dir .. "/state.ckpt", state)  -- for load, which the test may call first
  specs.checkpoint = {
    save = {dir .. "/state.ckpt", state}, load = {dir .. "/state.ckpt", opts = 2},
    save_tensors = "tpu.save (its entry is in the tpu group)",
    load_tensors = "tpu.load (its entry is in the tpu group)",
    data_position = "fit's resume support, called with its own data set and counts",
    restore_data_position = "fit's resume support, called with its own data set and position",
    resume_iter = "fit's resume support, called with its own data set and position",
    training_state = "fit's checkpoint callback, called with its own model",
    restore_training = "fit's resume support, called with its own model and state",
    resume_fit = "fit{resume=}, called by fit with its own arguments",
  }

  specs.callbacks = {
    Callback = "the base class of callbacks: users extend it (Callback:extend)",
    Checkpoint = {{path = dir .. "/c.safetensors"}, opts = 1},
    CsvLogger = {{path = dir .. "/log.csv"}, opts = 1}, EarlyStopping = {opts = 1},
    LrScheduler = {{schedule = id}, opts = 1},
    ModelCheckpoint = {dir .. "/c.safetensors", {}, opts = 2}, CSVLogger = {{path = dir .. "/log.csv"}, opts = 1},
    LearningRateScheduler = {id, {}, opts = 2},
    checkpoint = {{path = dir .. "/c.safetensors"}, opts = 1}, csv_logger = {{path = dir .. "/log.csv"}, opts = 1},
    early_stopping = {opts = 1}, lr_scheduler = {{schedule = id}, opts = 1},
  }
  local text = {vocab_size = 10, max_length = 4, num_layers = 1, hidden_dim = 4, num_heads = 1,
                intermediate_dim = 4}
  local image = function(size) return {include_top = false, input_shape = {size, size, 3}} end
  specs.applications = {BertBase = {text, opts = 1}, GPT2Small = {text, opts = 1},
                        AlexNet = {image(63), opts = 1}, VGG16 = {image(32), opts = 1},
                        ResNet50 = {image(32), opts = 1}, MobileNetV2 = {image(32), opts = 1},
                        Xception = {image(71), opts = 1}, EfficientNetB0 = {image(32), opts = 1},
                        NASNetMobile = {image(32), opts = 1}, NASNetLarge = {image(32), opts = 1}}
  local pixels = tpu.ones({2, 2, 3}, {dtype = "u8"})
  specs.image = {resize = {img, {2, 2}, opts = 3}, random_flip_left_right = {img, key},
                 random_flip_up_down = {img, key}, random_crop = {img, {2, 2}, key},
                 central_crop = {img, 0.5}, random_brightness = {img, 0.1, key},
                 random_contrast = {img, 0.5, 1.5, key}, read = {png, opts = 2},
                 write_png = {dir .. "/w.png", pixels}, write_jpeg = {dir .. "/w.jpg", pixels, opts = 3}}
  return specs
end

local function callable(v)
  local mt = getmetatable(v)
  return type(v) == "function" or (type(v) == "table" and type(mt) == "table" and mt.__call ~= nil)
end

-- Tables of functions inside a module that are not part of this test, with the reason.
local not_here = {
  tpu = {
    core = "the engine's binding, which the libraries call; users call tpu.*",
    options = "the command line's options: values, no functions",
    random = "its own group", nn = "its own group", data = "its own group", optim = "its own group",
    losses = "its own group", metrics = "its own group", strategy = "its own group",
    callbacks = "its own group",
    mixed_precision = "its own group", checkpoint = "its own group", plot = "its own group",
    applications = "its own group", image = "its own group",
  },
}

-- The public functions of a module: callable fields not starting with "_", and those of the
-- namespaces in it ("schedule.cosine" in optim).
local function exported(module, group)
  local names = {}
  for k, v in pairs(module) do
    if type(k) == "string" and not k:match("^_") then
      if callable(v) then
        names[#names + 1] = k
      elseif is_namespace(v) and not (not_here[group] or {})[k] then
        for k2, v2 in pairs(v) do
          if type(k2) == "string" and not k2:match("^_") and callable(v2) then names[#names + 1] = k .. "." .. k2 end
        end
      end
    end
  end
  table.sort(names)
  return names
end

-- The methods of a data set: its class chain's functions, without the private ones (a leading
-- underscore, or the class machinery).
local function dataset_methods()
  local names, seen, machinery = {}, {}, {extend = true, is_instance = true}
  local mt = getmetatable(ds)
  while mt do
    for k, v in pairs(mt) do
      if type(v) == "function" and not k:match("^_") and not machinery[k] and not seen[k] then
        seen[k] = true
        names[#names + 1] = k
      end
    end
    mt = mt.super
  end
  table.sort(names)
  return names
end

local modules = {
  tpu = tpu, nn = nn, data = data, optim = tpu.optim, losses = tpu.losses, metrics = tpu.metrics,
  random = tpu.random, strategy = tpu.strategy, callbacks = tpu.callbacks,
  mixed_precision = tpu.mixed_precision, checkpoint = tpu.checkpoint, plot = tpu.plot,
  applications = tpu.applications, image = tpu.image,
}

local function function_list(group)
  if group == "tensor" then
    local names = {}
    for k in pairs(tpu.core.Tensor) do names[#names + 1] = k end
    table.sort(names)
    return names
  end
  if group == "dataset" then return dataset_methods() end
  return exported(modules[group], group)
end

local function target(group, name)
  if group == "tensor" or group == "dataset" then return nil end
  local v = modules[group]
  for part in name:gmatch("[^.]+") do v = v[part] end
  return v
end

local specs  -- make_specs(dir), for the test running

local CALL_LINE
-- Calls fn (a tensor method: args[1][name], a data set method: ds[name]) with the arguments;
-- an error is located on the line below.
local function call(fn, args, group, name)
  CALL_LINE = debug.getinfo(1, "l").currentline + 1
  local r; if group == "tensor" then r = args[1][name](table.unpack(args, 1, args.n)) elseif group == "dataset" then r = ds[name](ds, table.unpack(args, 1, args.n)) else r = fn(table.unpack(args, 1, args.n)) end
  return r
end

local function arguments(spec)
  local args = {n = #spec}
  for i = 1, #spec do args[i] = spec[i] end
  if spec.opts and args.n < spec.opts then args.n = spec.opts end
  return args
end

-- Problems found for one function (a list of strings).
local function probe(group, name, spec, problems)
  local fn, what = target(group, name), group .. "." .. name
  local function expect_error(args, how, pattern)
    local ok, err = pcall(call, fn, args, group, name)
    local where = "test_arguments.lua:" .. CALL_LINE .. ": "
    if ok then
      problems[#problems + 1] = what .. " " .. how .. ": no error"
    elseif not tostring(err):find(where, 1, true) then
      problems[#problems + 1] = what .. " " .. how .. ": error not located at the call: " .. tostring(err)
    elseif pattern and not tostring(err):find(pattern, 1, true) then
      problems[#problems + 1] = what .. " " .. how .. ": error does not name " .. pattern .. ": " .. tostring(err)
    end
  end
  if spec.run ~= false then
    local ok, err = pcall(call, fn, arguments(spec), group, name)
    if not ok then problems[#problems + 1] = what .. ": the working call fails: " .. tostring(err) end
  end
  local any = {}
  for _, i in ipairs(spec.any or {}) do any[i] = true end
  local args = arguments(spec)
  for i = group == "tensor" and 2 or 1, args.n do
    if not any[i] then
      local wrong = arguments(spec)
      wrong[i] = bad
      expect_error(wrong, "with a coroutine as argument " .. i)
    end
  end
  do  -- nothing beyond the documented arguments
    local more = arguments(spec)
    more.n = more.n + 1
    more[more.n] = bad
    if not any[more.n] then expect_error(more, "with an extra argument") end
  end
  if spec.opts then
    local with = arguments(spec)
    local opts = {}
    for k, v in pairs(with[spec.opts] or {}) do opts[k] = v end
    opts.no_such_option = true
    with[spec.opts] = opts
    expect_error(with, "with an unknown option", "no_such_option")
  end
end

local function check_group(group)
  local problems = {}
  for _, name in ipairs(function_list(group)) do
    local spec = specs[group][name]
    if spec == nil then
      problems[#problems + 1] = group .. "." .. name .. ": no entry in test_arguments.lua (add one)"
    elseif type(spec) == "table" then
      probe(group, name, spec, problems)
    end
  end
  check.eq(table.concat(problems, "\n"), "")
end

for _, group in ipairs {"tpu", "tensor", "nn", "data", "dataset", "optim", "losses", "metrics",
                        "random", "strategy", "callbacks", "mixed_precision", "checkpoint", "plot",
                        "applications", "image"} do
  T["every function of " .. group .. " checks its arguments"] = function()
    local dir = data_util.temp_dir()
    specs = make_specs(dir)
    local ok, err = pcall(check_group, group)
    data_util.remove(dir)
    if not ok then error(err, 0) end
  end
end

return T
