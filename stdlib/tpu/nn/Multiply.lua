-- Multiplies a list of tensors elementwise: nn.Multiply() {a, b, c} (gates, squeeze-excitation).
-- As Keras's Multiply, the inputs share a rank and each size (batch aside) is equal or 1, which
-- broadcasts: a [batch, 1, 1, C] scale times a [batch, H, W, C] feature map.
--
--   local gated = nn.Multiply() {features, nn.Dense(64, {activation = "sigmoid"})(features)}
return require("tpu.nn.merge").layer("Multiply", function(a, b) return a * b end)
