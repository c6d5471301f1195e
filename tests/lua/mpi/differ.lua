-- Fits a small model under multi_worker{} (mpirun -np 2) where rank 1 differs from rank 0 in
-- the way arg[1] names: "activation" (tanh for relu), "size" (32 units for 16), "epochs" (3 for
-- 2), "same" (no difference: both train and rank 0 prints "trained") or "late" (the same, and
-- rank 0 then works 2 s more while rank 1 has ended).
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local s = tpu.strategy.multi_worker {}
local odd = s.rank == 1 and arg[1] or "same"
nn.initializers.set_seed(1)
local x = tpu.random.normal(tpu.random.key(2), {64, 8})
local y = x:sum(2):gt(0):cast("i32")
local model
do
  local _ <close> = s:scope()
  local units, activation = odd == "size" and 32 or 16, odd == "activation" and "tanh" or "relu"
  model = nn.Sequential {nn.Dense(units, {activation = activation}), nn.Dense(2)}
  model:compile {optimizer = optim.SGD {lr = 0.1}, loss = "sparse_categorical_crossentropy"}
end
model:fit(data.from_tensors {x, y}:batch(16), {epochs = odd == "epochs" and 3 or 2, verbose = 0})
if arg[1] == "late" and s.rank == 0 then
  local t0 = tpu.core.now()
  while tpu.core.now() - t0 < 2 do end
end
print("trained")
