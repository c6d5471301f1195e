-- padded_batch with a fixed padded shape: an element longer than the shape is an error that
-- names its position in the pass (counted from 1) and its length, at the line of the padded_batch call.
local tpu = require "tpu"
local lengths = {3, 5, 2, 12, 4}
local sentences = tpu.data.generator(function()
  local k = 0
  return function()
    k = k + 1
    if lengths[k] then return tpu.arange(lengths[k]) + 1, k % 2 end
  end
end)
local batches = sentences:padded_batch(2, {padded_shapes = {{8}}})
for ids, labels in batches:iter() do
  print(table.concat(ids.shape, "x"), table.concat(labels:totable(), " "))
end
