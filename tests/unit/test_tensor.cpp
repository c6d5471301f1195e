// Tensor buffers: where they are placed in host memory.
#include <doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/tensor.h"

using namespace tpu;

namespace {

// The VmFlags line of the mapping of /proc/self/smaps that holds address p ("" if none does).
std::string vm_flags_at(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

}  // namespace

TEST_CASE("large buffers start on a 2 MiB boundary, marked for huge pages while they live") {
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  Tensor large(DType::f32, {int64_t(3) << 20}, Tensor::Uninitialized{});  // 12 MiB
  Tensor small(DType::f32, {1000}, Tensor::Uninitialized{});
  const auto large_at = reinterpret_cast<uintptr_t>(large.raw());
  CHECK(large_at % kHuge == 0);
  CHECK(reinterpret_cast<uintptr_t>(small.raw()) % 64 == 0);
  // The mark is the "hg" VmFlag (MADV_HUGEPAGE), on kernels built with huge pages.
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    const std::byte* at = large.raw();
    const std::string flags = vm_flags_at(at);
    REQUIRE(!flags.empty());
    CHECK(flags.find(" hg") != std::string::npos);
    // Freed, its pages may serve small objects: the mark goes (or the allocator unmapped them).
    large = Tensor();
    CHECK(vm_flags_at(at).find(" hg") == std::string::npos);
  }
}
