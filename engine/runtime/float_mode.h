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

// Flushes subnormals on the calling thread while it lives, then gives the thread its mode back:
// every call into the Lua binding runs in one, so a program that embeds the library computes
// as the binary does inside tpu's calls and keeps its own mode outside them.
class FlushSubnormalsScope {
 public:
  FlushSubnormalsScope() : changed_(!flushes_subnormals()) {
    if (changed_) flush_subnormals();
  }
  ~FlushSubnormalsScope();
  FlushSubnormalsScope(const FlushSubnormalsScope&) = delete;
  FlushSubnormalsScope& operator=(const FlushSubnormalsScope&) = delete;

 private:
  bool changed_;
};

}  // namespace tpu
