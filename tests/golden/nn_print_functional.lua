-- print(model) and model:summary() of functional models: two inputs, two outputs and a shared
-- layer; and a token tagger with a padding mask and a TransformerEncoder on sequences of any
-- length (None in the shapes).
local tpu = require "tpu"
local nn = tpu.nn

local image = nn.Input {shape = {28, 28, 1}, name = "image"}
local meta = nn.Input {shape = {4}, name = "meta"}
local h = nn.Flatten()(nn.MaxPool2D()(nn.Conv2D(8, 3, {activation = "relu"})(image)))
local shared = nn.Dense(16, {activation = "relu", name = "shared"})
local a = shared(nn.Dense(32)(h))
local b = shared(nn.Dense(32)(meta))
local joined = nn.Concatenate {axis = -1} {a, b}
local model = nn.Model {inputs = {image, meta}, outputs = {nn.Dense(10, {name = "class"})(joined),
                                                           nn.Dense(1, {name = "score"})(joined)}}
print(model)
model:summary()

local tokens = nn.Input {shape = {-1}, dtype = "i32", name = "tokens"}
local mask = nn.Input {shape = {-1}, name = "mask"}
local x = nn.Embedding(1000, 32)(tokens)
x = nn.TransformerEncoder {num_heads = 4, intermediate_dim = 64, dropout = 0.1} {x, mask = mask}
local tagger = nn.Model {inputs = {tokens, mask}, outputs = nn.Dense(5)(x), name = "tagger"}
print(tagger)
tagger:summary()
