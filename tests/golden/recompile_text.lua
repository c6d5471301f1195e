-- Rule 3 on real variable-length text: batches of fortunes (Debian's fortunes-it) have many
-- lengths, so a jitted step compiles once per length and warns at the 8th; with
-- padded_batch{pad_to_multiple_of = 128} the signatures are bounded by ceil(max_len / 128).
local tpu = require "tpu"
local data = tpu.data
tpu.warn = function(message) io.write(message) end

local records = data.fortunes("/usr/share/games/fortunes/it"):take(400)
local vocab = data.Vocabulary.build(records, {level = "char", max_size = 200})
local max_len = 512
local function encode(s) return vocab:encode(s, {max_len = max_len}) end

local step = tpu.jit(function(ids) return (ids:cast("f32") * 0.5):sum() end, {name = "text_step"})
local unpadded = records:map(encode, {host = true}):padded_batch(4)
for ids in unpadded:iter() do step(ids) end
print("without pad_to_multiple_of: compiles", step:stats().compiles)

local step2 = tpu.jit(function(ids) return (ids:cast("f32") * 0.5):sum() end, {name = "text_step_padded"})
local padded = records:map(encode, {host = true}):padded_batch(4, {pad_to_multiple_of = 128})
for ids in padded:iter() do step2(ids) end
print("with pad_to_multiple_of = 128: compiles", step2:stats().compiles, "bound", math.ceil(max_len / 128))
