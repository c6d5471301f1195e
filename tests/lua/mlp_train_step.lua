-- A small MLP trained for a few steps with one tpu.jit train step (forward, value_and_grad,
-- Adam); prints each loss in hex (%a) and a checksum of the final weights, so two runs can be
-- compared bit for bit. test_compiler.lua runs it with and without --no-opt under --profile.
local tpu = require "tpu"

local ks = tpu.random.key(3):split(4)
local params = {tpu.random.normal(ks[1], {64, 128}) * 0.1, tpu.zeros {128}, tpu.random.normal(ks[2], {128, 10}) * 0.1,
                tpu.zeros {10}}
local x = tpu.random.normal(ks[3], {32, 64})
local y = (tpu.random.uniform(ks[4], {32}) * 10):cast("i32")

local function loss(p, xb, yb)
  local h = (xb:matmul(p[1]) + p[2]):relu()
  local logits = h:matmul(p[3]) + p[4]
  return -(logits:log_softmax() * yb:one_hot(10)):sum(-1):mean()
end

local opt = tpu.optim.Adam {lr = 1e-2}
local step = tpu.jit(function(p, s, xb, yb)
  local l, g = tpu.value_and_grad(loss)(p, xb, yb)
  local p2, s2 = opt:update(p, g, s)
  return p2, s2, l
end, {name = "mlp_train_step", donate_argnums = {1, 2}})

local state = opt:init(params)
for i = 1, 5 do
  local l
  params, state, l = step(params, state, x, y)
  print(string.format("step %d loss %a", i, l:item()))
end
for k, p in ipairs(params) do print(string.format("param %d sum %a", k, p:sum():item())) end
