#include "ir/op.h"

#include <array>

namespace tpu {

namespace {
constexpr std::array<std::string_view, kNumOps> kOpNames = {
#define OP(name, ...) #name,
#include "ir/ops.def"
#undef OP
};

struct OperandCount {
  int min, max;  // max kAnyCount: unbounded
};
constexpr std::array<OperandCount, kNumOps> kOperandCounts = {{
#define OP(name, min, max) {min, max},
#include "ir/ops.def"
#undef OP
}};

std::string operands(int n) { return std::to_string(n) + (n == 1 ? " operand" : " operands"); }
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

std::string operand_count_problem(Op op, size_t given) {
  const auto [min, max] = kOperandCounts[size_t(op)];
  if (given >= size_t(min) && (max == kAnyCount || given <= size_t(max))) return "";
  const std::string wanted = max == kAnyCount ? "at least " + operands(min)
                             : min == max     ? operands(min)
                                              : std::to_string(min) + " to " + operands(max);
  return std::string(op_name(op)) + " takes " + wanted + ", given " + std::to_string(given);
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
