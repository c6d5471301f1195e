-- The tputrain side of bench/run.sh: trains one benchmark model with fit and prints its
-- measurements as "result KEY VALUE" lines (bench/pytorch_models.py is the same models with
-- PyTorch).
--
--   tputrain --threads 2 bench/tputrain_models.lua MODEL PRECISION [STEPS [WARMUP [PROFILE [FEED [PAIRS]]]]]
--
-- MODEL: mlp (784-512-512-10 ReLU, batch 256), cnn (conv32-pool-conv64-pool-128-10, 3x3 "same"
-- convolutions, 2x2 pools, batch 128; Fashion-MNIST for both), transformer (the text model:
-- embedding 64 + positions, one encoder block with 4 heads and a 128-wide feed-forward network,
-- dropout 0.1, mean over the sequence, 5 classes; random tokens of length 128 from 128 ids,
-- batch 64), transformer256 (the same with 256 features, 4 heads, a 1024-wide feed-forward
-- network and 2 blocks, batch 32), resnet50, mobilenet_v2, efficientnet_b0 (tpu.applications
-- at 64x64x3, 10 classes, batch 64, on 512 random images). Adam lr 1e-3 for all. PRECISION: f32
-- or bf16 (the mixed_bfloat16 policy). FEED: memory (default: batches sliced from tensors
-- prepared in memory, in order), pipeline (as a script feeds fit: the raw data (u8 images,
-- i32 ids) shuffled, batched, converted by a traced map, prefetched) or alternate (both, on one
-- model: the timed steps alternate between them in blocks, below).
--
-- Phases, all in one process: WARMUP steps (the first one compiles the step), STEPS timed steps
-- (samples/s), then PROFILE steps with per-op timing on: the step's wall time minus the time
-- spent inside kernels is the host overhead (input slicing, Lua, dispatch, allocation).
--
-- alternate: STEPS steps on each feed in PAIRS (default 10) pairs of blocks, ABBA (memory then
-- pipeline, then pipeline then memory, ...), so a drift of the machine's speed over the run
-- hits both alike: separate processes, as bench/run.sh runs the feeds, differ by 10-25% on a
-- shared machine, more than the feeds do. Where the pipeline has a traced map, fit runs it
-- inside a step of its own (the map fused in), so each feed has its compiled step, and both
-- must compile once. Every block starts a pass of the data set (each fit does), so a pipeline
-- block also waits for its first batch. Prints each feed's samples/s, the median and range of
-- the pairs' pipeline/memory ratios, the ratio of their fastest blocks and the step's wait for
-- the prefetch thread per batch over all pipeline blocks; the other figures are the
-- pipeline's (bench/pipeline_vs_memory.sh runs it for every model).
local tpu = require "tpu"
local nn, optim, data, core = tpu.nn, tpu.optim, tpu.data, tpu.core

local model_name, precision = arg[1], arg[2] or "f32"
local steps = math.tointeger(tonumber(arg[3] or "100"))
local warmup = math.tointeger(tonumber(arg[4] or "5"))
local profile_steps = math.tointeger(tonumber(arg[5] or "20"))
local feed = arg[6] or "memory"
local pair_count = math.tointeger(tonumber(arg[7] or "10"))
assert(pair_count and pair_count > 0, "PAIRS must be a positive integer, got " .. tostring(arg[7]))
assert(feed == "memory" or feed == "pipeline" or feed == "alternate",
  "FEED must be memory, pipeline or alternate, got " .. tostring(feed))
local LENGTH, VOCAB, CLASSES = 128, 128, 5

local function result(key, value) print(string.format("result %s %s", key, value)) end

if precision == "bf16" then
  if tpu.mixed_precision.policy().compute_dtype ~= "bf16" then
    tpu.mixed_precision.set_policy("mixed_bfloat16")
  end
  assert(tpu.mixed_precision.policy().compute_dtype == "bf16",
    "the mixed_bfloat16 policy is set but the compute dtype is not bf16")
elseif precision ~= "f32" then
  error("precision must be f32 or bf16, got " .. tostring(precision), 0)
end

-- The whole Fashion-MNIST training split: u8 images and labels, in file order.
local function fashion_mnist()
  return data.fashion_mnist("train"):batch(60000):iter()()
end

-- Embedding and learned positions, `blocks` encoder blocks, the mean over the sequence, the logits.
local TextClassifier = nn.Module:extend("TextClassifier")
function TextClassifier:__init(dim, ff, blocks)
  self:init_common({})
  self.dim = dim
  self.embedding = nn.Embedding(VOCAB, dim)
  self.encoders = {}
  for i = 1, blocks do
    self.encoders[i] = nn.TransformerEncoder {num_heads = 4, intermediate_dim = ff, dropout = 0.1}
  end
  self.logits = nn.Dense(CLASSES)
  self.modules = {self.embedding, self.logits, table.unpack(self.encoders)}
end
function TextClassifier:build(_shape)
  self:add_weight {name = "position", shape = {LENGTH, self.dim}, initializer = "random_normal"}
end
function TextClassifier:call(ids, ctx)
  local h = self.embedding(ids, ctx) + self.position
  for _, encoder in ipairs(self.encoders) do h = encoder(h, ctx) end
  return self.logits(h:mean(2), ctx)
end

local APPS = {resnet50 = "ResNet50", mobilenet_v2 = "MobileNetV2", efficientnet_b0 = "EfficientNetB0"}

-- Random token ids [n, LENGTH] and classes [n].
local function tokens(n)
  local k1, k2 = table.unpack(tpu.random.key(1):split(2))
  return (tpu.random.uniform(k1, {n, LENGTH}) * VOCAB):cast("i32"), (tpu.random.uniform(k2, {n}) * CLASSES):cast("i32")
end

-- model, batch size, raw x, y, and the map from a raw batch to the model's input (nil: none)
local function setup(name)
  if name == "mlp" or name == "cnn" then
    local x, y = fashion_mnist()
    local shape = name == "mlp" and {-1, 784} or {-1, 28, 28, 1}
    local to_input = function(xb) return xb:reshape(shape):cast("f32") / 255 end
    if name == "mlp" then
      return nn.Sequential {
        nn.Dense(512, {activation = "relu"}),
        nn.Dense(512, {activation = "relu"}),
        nn.Dense(10),
      }, 256, x, y, to_input
    end
    return nn.Sequential {
      nn.Conv2D(32, 3, {activation = "relu", padding = "same"}),
      nn.MaxPool2D(),
      nn.Conv2D(64, 3, {activation = "relu", padding = "same"}),
      nn.MaxPool2D(),
      nn.Flatten(),
      nn.Dense(128, {activation = "relu"}),
      nn.Dense(10),
    }, 128, x, y, to_input
  elseif name == "transformer" then
    local x, y = tokens(64 * 32)
    return TextClassifier(64, 128, 1), 64, x, y, nil
  elseif name == "transformer256" then
    local x, y = tokens(32 * 32)
    return TextClassifier(256, 1024, 2), 32, x, y, nil
  elseif APPS[name] then
    local k1, k2 = table.unpack(tpu.random.key(2):split(2))
    local x = (tpu.random.uniform(k1, {512, 64, 64, 3}) * 256):cast("u8")
    local y = (tpu.random.uniform(k2, {512}) * 10):cast("i32")
    local model = tpu.applications[APPS[name]] {input_shape = {64, 64, 3}, classes = 10}
    return model, 64, x, y, function(xb) return xb:cast("f32") / 255 end
  end
  error("model must be mlp, cnn, transformer, transformer256, resnet50, mobilenet_v2 or "
    .. "efficientnet_b0, got " .. tostring(name), 0)
end

local model, batch, x, y, to_input = setup(model_name)
local train

-- Bytes of the data set held in memory (the x and y tensors fit slices batches from).
local DTYPE_BYTES = {f32 = 4, i32 = 4, bf16 = 2, u8 = 1, bool = 1}
local function nbytes(t)
  local n = DTYPE_BYTES[t.dtype]
  for _, d in ipairs(t.shape) do n = n * d end
  return n
end
-- memory: the inputs converted once, batches sliced in order; pipeline: the raw data shuffled,
-- batched, converted per batch by a traced map and prefetched, as a script writes it.
local feeds, data_bytes, prefetched = {}, 0, nil
if feed ~= "memory" then
  local pipeline = data.from_tensors {x, y}:shuffle(x.shape[1], {seed = 1}):batch(batch, {drop_remainder = true})
  if to_input then pipeline = pipeline:map(function(xb, yb) return to_input(xb), yb end) end
  prefetched = pipeline:prefetch(2)
  feeds.pipeline = prefetched:cycle()
  data_bytes = data_bytes + nbytes(x) + nbytes(y)
end
if feed ~= "pipeline" then
  local converted = to_input and to_input(x) or x
  feeds.memory = data.from_tensors {converted, y}:batch(batch, {drop_remainder = true}):cycle()
  data_bytes = data_bytes + nbytes(converted) + (feed == "memory" and nbytes(y) or 0)
end
x = nil
train = feeds.pipeline or feeds.memory
result("data_bytes", data_bytes)

-- Peak resident memory in KiB (VmHWM). Training's peak is measured from here on: preparing the
-- data set (decoding, converting) is done, its temporaries are collected and the peak is reset.
local function peak_rss_kb()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmHWM:%s*(%d+)")
    if kb then return tonumber(kb) end
  end
  return 0
end
collectgarbage()
result("prepare_rss_kb", peak_rss_kb())
local clear_refs = io.open("/proc/self/clear_refs", "w")
if clear_refs then clear_refs:write("5") clear_refs:close() end
model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy"}


-- Seconds for n steps on `dataset` (default: train); fails when the loss is not finite.
local function fit(n, dataset)
  local t0 = core.now()
  local history = model:fit(dataset or train, {epochs = 1, steps_per_epoch = n, verbose = 0})
  local seconds = core.now() - t0
  local loss = history.history.loss[1]
  if loss ~= loss or loss == math.huge or loss == -math.huge then
    error(string.format("the loss is %s after %d more steps", tostring(loss), n), 0)
  end
  return seconds
end

-- The step's wait for the prefetch thread, over the pipeline's passes added so far.
local waited = {batches = 0, ms = 0}
local function add_prefetch_wait()
  local stats = prefetched and prefetched:prefetch_stats()
  if stats then waited.batches, waited.ms = waited.batches + stats.batches, waited.ms + stats.wait_ms end
end

-- alternate: the timed steps in ABBA pairs of blocks on the two feeds (see the header).
local function alternate_feeds()
  local pairs_count = math.min(pair_count, steps)
  local block = steps // pairs_count
  local seconds, ratios, best = {memory = 0, pipeline = 0}, {}, {memory = math.huge, pipeline = math.huge}
  for p = 1, pairs_count do
    local t = {}
    for _, side in ipairs(p % 2 == 1 and {"memory", "pipeline"} or {"pipeline", "memory"}) do
      t[side] = fit(block, feeds[side])
      seconds[side] = seconds[side] + t[side]
      best[side] = math.min(best[side], t[side])
      if side == "pipeline" then add_prefetch_wait() end
    end
    ratios[#ratios + 1] = t.memory / t.pipeline  -- the pipeline's samples/s over memory's
  end
  table.sort(ratios)
  local n = #ratios
  local median = n % 2 == 1 and ratios[(n + 1) // 2] or (ratios[n // 2] + ratios[n // 2 + 1]) / 2
  for _, side in ipairs {"memory", "pipeline"} do
    result("samples_per_s_" .. side, string.format("%.1f", block * pairs_count * batch / seconds[side]))
  end
  result("pipe_mem_median", string.format("%.4f", median))
  result("pipe_mem_range", string.format("%.4f-%.4f", ratios[1], ratios[n]))
  result("pipe_mem_best", string.format("%.4f", best.memory / best.pipeline))
  steps = block * pairs_count
  return seconds.pipeline
end

local first = fit(1)
if warmup > 1 then fit(warmup - 1) end
local memory_step  -- alternate: the memory feed's compiled step, checked below with the pipeline's
if feed == "alternate" then
  fit(math.max(warmup, 1), feeds.memory)
  memory_step = model.compiled.steps.train
end
local seconds = feed == "alternate" and alternate_feeds() or fit(steps)
-- How long a step waited for the pipeline's prefetch thread, per batch: over the timed steps'
-- last pass (pipeline) or all the pipeline's blocks (alternate).
if feed == "pipeline" then add_prefetch_wait() end
if waited.batches > 0 then result("prefetch_wait_ms", string.format("%.4f", waited.ms / waited.batches)) end

-- Seconds spent in kernels so far (op timing accumulates; --profile turns it on from the start).
local function kernel_seconds()
  local total = 0
  for _, t in ipairs(core.op_times()) do total = total + t.seconds end
  return total
end
local was_profiling = tpu.options.profile
core.set_op_profiling(true)
local k0 = kernel_seconds()
local profiled = fit(profile_steps)
local kernel = kernel_seconds() - k0
core.set_op_profiling(was_profiling or false)

-- The compiled train step (fit's tpu.jit function): compile time, FLOPs and the HBM plan.
local step_fn = model.compiled and model.compiled.steps and model.compiled.steps.train
if step_fn then
  local stats, exe = step_fn:stats(), step_fn.last.exe
  if precision == "bf16" and not exe:text():find("bf16", 1, true) then
    error("the bf16 policy is on but the compiled train step has no bf16 value", 0)
  end
  for _, step in ipairs {step_fn, memory_step} do
    local compiles = step:stats().compiles
    if compiles ~= 1 then error(string.format("the train step compiled %d times (expected once)", compiles), 0) end
  end
  local info = exe:info()
  result("compile_ms", string.format("%.1f", stats.compile_ms))
  result("graph_gflop", string.format("%.4f", info.flops / 1e9))
  result("hbm_bytes", info.hbm_bytes)
  result("arena_bytes", info.planned_bytes)
else
  io.stderr:write("bench: fit's compiled train step not found (model.compiled.steps.train): "
    .. "no compile time, FLOPs or HBM plan\n")
end

local rss_kb = peak_rss_kb()

result("batch", batch)
result("steps", steps)
result("samples_per_s", string.format("%.1f", steps * batch / seconds))
result("step_ms", string.format("%.3f", seconds * 1000 / steps))
result("profiled_step_ms", string.format("%.3f", profiled * 1000 / profile_steps))
result("kernel_ms", string.format("%.3f", kernel * 1000 / profile_steps))
result("first_step_ms", string.format("%.1f", first * 1000))
result("rss_kb", rss_kb)
