// One exception type for every user-facing engine error; the interpreter prefixes file:line.
#pragma once
#include <stdexcept>
#include <string>

namespace tpu {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A program that does not fit the device's memory: the caller may answer with advice (a smaller
// batch) instead of matching the message text.
struct ResourceExhausted : Error {
  using Error::Error;
};

}  // namespace tpu
