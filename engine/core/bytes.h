// Byte counts as users read them in messages and reports.
#pragma once
#include <string>

namespace tpu {

// "9.21 GiB", "12.0 MiB", "1.00 TiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace tpu
