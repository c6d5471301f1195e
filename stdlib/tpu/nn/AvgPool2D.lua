-- Mean over windows of NHWC images: nn.AvgPool2D() (2x2, stride 2), nn.AvgPool2D {pool_size = 3}.
-- Options: pool_size (n or {h, w}), strides (default pool_size), padding "valid" | "same".
return require("tpu.nn.pooling").class("AvgPool2D", "avg_pool2d")
