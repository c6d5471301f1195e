// One exception type for every user-facing engine error; the interpreter prefixes file:line.
#pragma once
#include <stdexcept>
#include <string>

namespace tpu {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tpu
