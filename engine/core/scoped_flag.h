// Sets one of this thread's flags for a scope and restores it after: the base of the scopes
// that change how the calling thread works (HostAllocationScope, SerialScope,
// OpTimesExcluded), each of which names its own flag.
#pragma once

namespace tpu {

class ScopedFlag {
 public:
  explicit ScopedFlag(bool& flag) : flag_(flag), previous_(flag) { flag = true; }
  ~ScopedFlag() { flag_ = previous_; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  bool& flag_;
  bool previous_;
};

}  // namespace tpu
