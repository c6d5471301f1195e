#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace tpu {

std::string shape_fault(std::span<const int64_t> dims) {
  for (int64_t d : dims)
    if (d < 0) return "has a negative dimension";
  // The product of the dims other than 0, stopped before it can pass kMaxElements (and so
  // before it can overflow).
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d == 0) continue;
    if (d > (kMaxElements - 1) / product) {  // product * d >= kMaxElements
      return std::find(dims.begin(), dims.end(), 0) != dims.end()
                 ? "is too large: its dimensions other than 0 multiply to 2^40 or more"
                 : "is too large: a tensor has fewer than 2^40 elements";
    }
    product *= d;
  }
  return "";
}

void check_shape(const Shape& s, std::string_view call) {
  if (std::string p = shape_problem(s); !p.empty()) throw Error(std::string(call) + ": " + p);
}

}  // namespace tpu
