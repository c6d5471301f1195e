-- tpu.nn: layers and models. Each class lives in its own file (tpu/nn/Dense.lua, ...).
local nn = {}

nn.Module = require "tpu.nn.Module"
nn.Sequential = require "tpu.nn.Sequential"
nn.Dense = require "tpu.nn.Dense"
nn.Flatten = require "tpu.nn.Flatten"
nn.Activation = require "tpu.nn.Activation"
nn.History = require "tpu.nn.History"
nn.Progbar = require "tpu.nn.Progbar"
nn.initializers = require "tpu.nn.initializers"

-- Seeds weight initialization (default 0, or `tputrain --seed N`).
nn.set_seed = nn.initializers.set_seed

return nn
