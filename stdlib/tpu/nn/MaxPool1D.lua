-- Max over windows of steps of [batch, steps, channels]: nn.MaxPool1D() (2 steps, stride 2),
-- nn.MaxPool1D(3, {strides = 2}). Options: pool_size, strides (default pool_size), padding
-- "valid" | "same". Keras's name nn.MaxPooling1D is the same class.
return require("tpu.nn.pooling1d").class("MaxPool1D", "max_pool2d")
