// Subnormal floats are flushed to zero, as TPU arithmetic does: FTZ (results) and DAZ (inputs)
// in the SSE/AVX control register. It also keeps steps fast: x86 takes a microcode assist for
// every subnormal operand or result, and a model's small gradients and Adam's squared moments
// drift into that range after a few epochs (the Fashion-MNIST MLP's steps slowed down from its
// fourth epoch on). Every thread that computes runs in this mode, so results do not depend
// on which thread computed them.
#pragma once

namespace tpu {

// Sets the mode on the calling thread; threads it starts afterwards inherit it. tputrain's
// main and the unit tests' call it first; pool workers call it too. No-op off x86.
void flush_subnormals();

// Whether the calling thread flushes subnormals (both FTZ and DAZ set).
bool flushes_subnormals();

}  // namespace tpu
