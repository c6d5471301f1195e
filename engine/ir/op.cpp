#include "ir/op.h"

#include <array>

namespace tpu {

namespace {
constexpr std::array<std::string_view, kNumOps> kOpNames = {
#define OP(name) #name,
#include "ir/ops.def"
#undef OP
};
}  // namespace

std::string_view op_name(Op op) { return kOpNames[size_t(op)]; }

bool parse_op(std::string_view s, Op& out) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == s) {
      out = Op(i);
      return true;
    }
  return false;
}

std::string_view cmp_name(Cmp c) {
  constexpr std::array<std::string_view, 6> names = {"lt", "le", "gt", "ge", "eq", "ne"};
  return names[size_t(c)];
}

std::string_view reduce_name(ReduceKind k) {
  constexpr std::array<std::string_view, 3> names = {"sum", "max", "min"};
  return names[size_t(k)];
}

bool Attrs::operator==(const Attrs& o) const {
  return dims == o.dims && dims2 == o.dims2 && axis == o.axis && flag_a == o.flag_a &&
         flag_b == o.flag_b && value == o.value && to == o.to && literal == o.literal &&
         body == o.body;
}

}  // namespace tpu
