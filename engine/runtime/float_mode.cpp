#include "runtime/float_mode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace tpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {
constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;  // MXCSR bits
}  // namespace

void flush_subnormals() { _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero); }
bool flushes_subnormals() {
  const unsigned both = kFlushToZero | kDenormalsAreZero;
  return (_mm_getcsr() & both) == both;
}
FlushSubnormalsScope::~FlushSubnormalsScope() {
  if (changed_) _mm_setcsr(_mm_getcsr() & ~(kFlushToZero | kDenormalsAreZero));
}
#else
FlushSubnormalsScope::~FlushSubnormalsScope() {}
void flush_subnormals() {}
bool flushes_subnormals() { return false; }
#endif

}  // namespace tpu
