-- A small GPT-2 language model trained as a user trains one: measures samples/s of fit on a
-- tpu.data pipeline and prints the loss and the planned HBM of the compiled step.
--
--   tputrain --threads 2 bench/gpt2_train.lua [PRECISION [STEPS [HIDDEN [HEADS [LAYERS]]]]]
--
-- PRECISION f32 or bf16 (mixed_bfloat16); STEPS timed steps (30); HIDDEN features (256) in HEADS
-- heads (4), LAYERS blocks (2), feed-forward 4 x HIDDEN with GPT-2's tanh GELU, sequence 128,
-- batch 32, vocabulary 1000: next-token prediction over 512 random sequences, Adam 1e-4, fed by
-- from_tensors -> shuffle -> batch(drop_remainder) -> prefetch. Runs of two builds alternated in
-- the same minutes compare them; the loss printed is the same for builds that compute the same.
local tpu = require "tpu"
local optim, data, core, losses = tpu.optim, tpu.data, tpu.core, tpu.losses

local precision, steps = arg[1] or "f32", math.tointeger(tonumber(arg[2] or "30"))
local hidden, heads = math.tointeger(tonumber(arg[3] or "256")), math.tointeger(tonumber(arg[4] or "4"))
local layers = math.tointeger(tonumber(arg[5] or "2"))
if precision == "bf16" then
  tpu.mixed_precision.set_policy("mixed_bfloat16")
elseif precision ~= "f32" then
  error("PRECISION must be f32 or bf16, got " .. tostring(precision), 0)
end

local N, LENGTH, BATCH, VOCAB = 512, 128, 32, 1000
local key = tpu.random.key(1)
local tokens = (tpu.random.uniform(key, {N, LENGTH + 1}) * VOCAB):cast("i32")
local inputs = tokens:slice({{1, N}, {1, LENGTH}})
local targets = tokens:slice({{1, N}, {2, LENGTH + 1}})
local mask = tpu.ones({N, LENGTH}, {dtype = "i32"})

local model = tpu.applications.GPT2Small {vocab_size = VOCAB, max_length = LENGTH, num_layers = layers,
                                          hidden_dim = hidden, num_heads = heads, intermediate_dim = 4 * hidden,
                                          logits = true}
model:compile {optimizer = optim.Adam {lr = 1e-4}, loss = losses.SparseCategoricalCrossentropy {from_logits = true}}
local train = data.from_tensors {{inputs, mask}, targets}:shuffle(N, {seed = 1})
  :batch(BATCH, {drop_remainder = true}):prefetch(2):cycle()

model:fit(train, {epochs = 1, steps_per_epoch = 3, verbose = 0})  -- compiles
local t0 = core.now()
local history = model:fit(train, {epochs = 1, steps_per_epoch = steps, verbose = 0})
local seconds = core.now() - t0
local exe = model.compiled.steps.train.last.exe
print(string.format("GPT-2 %s, %d blocks of %d: %.1f samples/s, loss %.4f, HBM %.1f MB", precision, layers, hidden,
  steps * BATCH / seconds, history.history.loss[1], exe:info().hbm_bytes / 1e6))
