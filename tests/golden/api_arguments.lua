-- Arguments are checked like Lua's own libraries check theirs, at the user's line: a wrong
-- type, an extra argument or an unknown option is an error, never silently ignored.
local tpu = require "tpu"
local nn, losses = tpu.nn, tpu.losses

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

local x = tpu.ones {2, 3}
print(table.concat(x:sum {axis = 2}.shape, ","), table.concat(x:mean {axis = 1, keepdims = true}.shape, ","))
try(function() local _ = x:sum("rows") end)
try(function() local _ = x:sum {axes = 2} end)
try(function() local _ = x:max(1, "yes") end)
try(function() local _ = x:mean {axis = 1, keep = true} end)
try(function() local _ = x:argmax {axis = {1, 2}} end)
try(function() local _ = x:exp(2) end)
try(function() local _ = x + "one" end)
try(function() local _ = tpu.zeros({2}, {dtyp = "i32"}) end)
try(function() local _ = x:matmul(x:transpose(), {to = "f32", cast = true}) end)
try(function() local _ = tpu.relu("x") end)
try(function() local _ = x:softmax("last") end)
try(function() local _ = losses.SparseCategoricalCrossentropy {from_logit = true} end)
try(function() local _ = losses.sparse_categorical_crossentropy(x, "logits") end)
try(function() local _ = losses.mse(x, x, {from_logits = true}) end)
-- option values of the wrong type
try(function() local _ = x:sum {axis = "rows"} end)
try(function() local _ = x:sum {axis = 1, keepdims = "yes"} end)
try(function() local _ = x:sum {1, "2"} end)
try(function() local _ = x:mean {axis = "rows"} end)
try(function() local _ = tpu.zeros({2}, {dtype = 32}) end)
try(function() local _ = tpu.data.range(4):batch(2, {}, true) end)
try(function() local _ = nn.Dense(4, {}, "relu") end)

-- A table raised by a data set's function without __tostring says what it was.
local ds = tpu.data.from_tensors {tpu.zeros {4, 2}}:batch(2)
  :map(function() error({code = 7}) end)
local model = nn.Sequential {nn.Dense(2)}
model:compile {optimizer = "sgd", loss = "mse"}
for _ in ds:iter() do end
