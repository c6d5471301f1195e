-- Adds a list of tensors elementwise: nn.Add() {a, b, c} (residual connections). As Keras's Add,
-- the inputs share a rank and each size (batch aside) is equal or 1, which broadcasts.
return require("tpu.nn.merge").layer("Add", function(a, b) return a + b end)
