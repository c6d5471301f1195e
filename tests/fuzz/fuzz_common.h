// Shared by the fuzz targets: parsers may throw tpu::Error and nothing else; anything else
// (another exception, a crash, a sanitizer report, a broken round trip) is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"

namespace fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs the parser; tpu::Error is the expected way to refuse an input.
template <class F>
void expect_only_tpu_errors(F parse) {
  try {
    parse();
  } catch (const tpu::Error&) {
  }
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

// A file name private to this process (parsers that only read paths).
inline std::string scratch_path(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/tputrain_fuzz_" + std::to_string(::getpid()) + suffix;
}

}  // namespace fuzz
