-- A small BERT classifier trained with padding masks, as a user feeds one: measures samples/s of
-- fit on a tpu.data pipeline with MultiHeadAttention's fused op, the separate ops, or the
-- layer's default choice, and the planned HBM of the compiled step.
--
--   tputrain --threads 2 bench/bert_attention.lua [PRECISION [STEPS [HIDDEN [HEADS [PATH]]]]]
--
-- PRECISION f32 or bf16 (mixed_bfloat16); STEPS timed steps (30); HIDDEN features (256) in
-- HEADS heads (4: heads of 64); PATH fused, unfused or auto (nn.enable_flash_attention,
-- nn.disable_flash_attention, or neither). 2 blocks, feed-forward 4 x HIDDEN, sequence 128,
-- batch 32, 512 random sequences of 16 to 128 tokens (every batch is padded), Adam 1e-4. Runs
-- of the paths alternated in the same minutes compare them; the loss printed is the same on
-- every path (the dropout draws the same masks).
local tpu = require "tpu"
local nn, optim, data, core = tpu.nn, tpu.optim, tpu.data, tpu.core

local precision, steps = arg[1] or "f32", math.tointeger(tonumber(arg[2] or "30"))
local hidden, heads = math.tointeger(tonumber(arg[3] or "256")), math.tointeger(tonumber(arg[4] or "4"))
local path = arg[5] or "auto"
if precision == "bf16" then
  tpu.mixed_precision.set_policy("mixed_bfloat16")
elseif precision ~= "f32" then
  error("PRECISION must be f32 or bf16, got " .. tostring(precision), 0)
end
if path == "fused" then
  nn.enable_flash_attention()
elseif path == "unfused" then
  nn.disable_flash_attention()
elseif path ~= "auto" then
  error("PATH must be fused, unfused or auto, got " .. tostring(path), 0)
end

local N, LENGTH, BATCH, VOCAB = 512, 128, 32, 1000
local k1, k2, k3 = table.unpack(tpu.random.key(1):split(3))
local lengths = (tpu.random.uniform(k2, {N, 1}) * (LENGTH - 16) + 16):cast("i32")
local mask = core.arange(LENGTH):reshape({1, LENGTH}):lt(lengths):cast("i32")
local ids = (tpu.random.uniform(k1, {N, LENGTH}) * VOCAB):cast("i32") * mask
local segments = tpu.zeros({N, LENGTH}, {dtype = "i32"})
local labels = (tpu.random.uniform(k3, {N}) * 2):cast("i32")

local model = tpu.applications.BertBase {vocab_size = VOCAB, max_length = LENGTH, num_layers = 2, hidden_dim = hidden,
                                         num_heads = heads, intermediate_dim = 4 * hidden, num_classes = 2}
model:compile {optimizer = optim.Adam {lr = 1e-4}, loss = "sparse_categorical_crossentropy"}
local train = data.from_tensors {{ids, segments, mask}, labels}:shuffle(N, {seed = 1})
  :batch(BATCH, {drop_remainder = true}):prefetch(2):cycle()

model:fit(train, {epochs = 1, steps_per_epoch = 3, verbose = 0})  -- compiles
local t0 = core.now()
local history = model:fit(train, {epochs = 1, steps_per_epoch = steps, verbose = 0})
local seconds = core.now() - t0
local exe = model.compiled.steps.train.last.exe
local fused = exe:text():find("= attention ", 1, true) ~= nil
print(string.format("%s %s (%s): %.1f samples/s, loss %.4f, HBM %.1f MB", precision, path,
  fused and "fused" or "separate ops", steps * BATCH / seconds, history.history.loss[1], exe:info().hbm_bytes / 1e6))
