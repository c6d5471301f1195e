#include "runtime/debug_level.h"

#include <cstdlib>
#include <cstring>

namespace tpu {

int parse_debug_level(const char* v) {
  if (!v || !*v || std::strcmp(v, "0") == 0) return 0;
  const int n = std::atoi(v);
  return n > 0 ? n : 1;
}

int debug_level() {
  static const int level = parse_debug_level(std::getenv("TPUTRAIN_DEBUG"));
  return level;
}

}  // namespace tpu
