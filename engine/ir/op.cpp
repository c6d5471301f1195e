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

const Dims& Attrs::dims() const {
  static const Dims none;
  return rare_ ? rare_->dims : none;
}

const Dims& Attrs::dims2() const {
  static const Dims none;
  return rare_ ? rare_->dims2 : none;
}

const std::shared_ptr<const Tensor>& Attrs::literal() const {
  static const std::shared_ptr<const Tensor> none;
  return rare_ ? rare_->literal : none;
}

const std::shared_ptr<const Graph>& Attrs::body() const {
  static const std::shared_ptr<const Graph> none;
  return rare_ ? rare_->body : none;
}

RareAttrs& Attrs::own_rare() {
  if (!rare_) rare_ = std::make_shared<RareAttrs>();
  else if (rare_.use_count() > 1) rare_ = std::make_shared<RareAttrs>(*rare_);
  return *rare_;
}

bool Attrs::operator==(const Attrs& o) const {
  if (axis != o.axis || transpose_lhs != o.transpose_lhs || transpose_rhs != o.transpose_rhs || to != o.to)
    return false;
  if (rare_ == o.rare_) return true;
  const bool same_window = window() && o.window() ? *window() == *o.window() : window() == o.window();
  return same_window && dims() == o.dims() && dims2() == o.dims2() && value() == o.value() &&
         literal() == o.literal() && body() == o.body();
}

}  // namespace tpu
