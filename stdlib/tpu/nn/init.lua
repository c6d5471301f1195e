-- tpu.nn: layers and models. Each class lives in its own file (tpu/nn/Dense.lua, ...).
local nn = {}

nn.Module = require "tpu.nn.Module"
nn.Sequential = require "tpu.nn.Sequential"
nn.Model = require "tpu.nn.Model"
nn.Input = require "tpu.nn.Input"
for _, name in ipairs {"Dense", "Flatten", "Reshape", "Activation", "Dropout", "Conv2D",
                       "MaxPool2D", "AvgPool2D", "GlobalAvgPool2D", "BatchNorm", "LayerNorm",
                       "Embedding", "MultiHeadAttention", "TransformerEncoder", "Concatenate",
                       "Add", "Multiply", "PositionEmbedding", "TransformerDecoder", "ZeroPadding2D",
                       "Cropping2D", "GlobalMaxPool2D", "DepthwiseConv2D", "SeparableConv2D",
                       "Conv2DTranspose", "Conv1D", "UpSampling2D", "Rescaling", "Normalization"} do
  nn[name] = require("tpu.nn." .. name)
end
-- Keras's names of the global poolings.
nn.GlobalAveragePooling2D, nn.GlobalMaxPooling2D = nn.GlobalAvgPool2D, nn.GlobalMaxPool2D
require "tpu.nn.persistence"  -- model:save(path), model:load(path)
nn.History = require "tpu.nn.History"
nn.Progbar = require "tpu.nn.Progbar"
nn.initializers = require "tpu.nn.initializers"
nn.regularizers = require "tpu.nn.regularizers"

-- Seeds weight initialization (default 0, or `tputrain --seed N`).
nn.set_seed = nn.initializers.set_seed

return nn
