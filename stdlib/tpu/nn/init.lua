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
                       "Conv2DTranspose", "Conv1D", "UpSampling2D", "Rescaling", "Normalization",
                       "ReLU", "LeakyReLU", "ELU", "Softmax", "MaxPool1D", "AvgPool1D",
                       "GlobalAvgPool1D", "GlobalMaxPool1D"} do
  nn[name] = require("tpu.nn." .. name)
end
-- Keras's names of the global poolings.
nn.GlobalAveragePooling2D, nn.GlobalMaxPooling2D = nn.GlobalAvgPool2D, nn.GlobalMaxPool2D
nn.GlobalAveragePooling1D, nn.GlobalMaxPooling1D = nn.GlobalAvgPool1D, nn.GlobalMaxPool1D
-- Keras 3's other names of these classes (keras.layers.X is the same class as nn.Y).
nn.Layer = nn.Module
nn.BatchNormalization, nn.LayerNormalization = nn.BatchNorm, nn.LayerNorm
nn.MaxPooling2D, nn.AveragePooling2D = nn.MaxPool2D, nn.AvgPool2D
nn.MaxPooling1D, nn.AveragePooling1D = nn.MaxPool1D, nn.AvgPool1D
nn.Convolution1D, nn.Convolution2D, nn.Convolution2DTranspose = nn.Conv1D, nn.Conv2D, nn.Conv2DTranspose
nn.SeparableConvolution2D = nn.SeparableConv2D
require "tpu.nn.persistence"  -- model:save(path), model:load(path)
nn.History = require "tpu.nn.History"
nn.Progbar = require "tpu.nn.Progbar"
nn.initializers = require "tpu.nn.initializers"
nn.regularizers = require "tpu.nn.regularizers"

-- Seeds weight initialization (default 0, or `tputrain --seed N`).
nn.set_seed = nn.initializers.set_seed
local flash_attention = require "tpu.nn.flash_attention"
nn.enable_flash_attention = flash_attention.enable_flash_attention
nn.disable_flash_attention = flash_attention.disable_flash_attention
nn.is_flash_attention_enabled = flash_attention.is_flash_attention_enabled

-- A name tpu.nn lacks is an error listing the classes it has (nn.Foo(...) would otherwise fail
-- as "attempt to call a nil value").
local errors = require "tpu.errors"
return errors.strict_namespace(nn, "tpu.nn", {
  listed = function(k) return k:match("^%u") and k ~= "History" and k ~= "Progbar" end,
  has = function(names) return "its layers and models: " .. table.concat(names, ", ") end,
})
