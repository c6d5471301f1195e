#include "core/bytes.h"

#include <cstdio>

namespace tpu {

std::string format_bytes(double bytes) {
  constexpr double KiB = 1024.0, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;
  char buf[32];
  if (bytes >= TiB) std::snprintf(buf, sizeof buf, "%.2f TiB", bytes / TiB);
  else if (bytes >= GiB) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / GiB);
  else if (bytes >= MiB) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / MiB);
  else if (bytes >= KiB) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / KiB);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

}  // namespace tpu
