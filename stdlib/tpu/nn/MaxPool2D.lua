-- Max over windows of NHWC images: nn.MaxPool2D() (2x2, stride 2), nn.MaxPool2D(3, {strides = 2}).
-- Options: pool_size (n or {h, w}), strides (default pool_size), padding "valid" | "same".
return require("tpu.nn.pooling").class("MaxPool2D", "max_pool2d")
