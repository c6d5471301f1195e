-- Mean over windows of steps of [batch, steps, channels]: nn.AvgPool1D() (2 steps, stride 2),
-- nn.AvgPool1D(3, {strides = 1, padding = "same"}). Options as nn.MaxPool1D; with "same" a
-- window at an edge averages the steps it covers. Keras's name nn.AveragePooling1D is the same class.
return require("tpu.nn.pooling1d").class("AvgPool1D", "avg_pool2d")
