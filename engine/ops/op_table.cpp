// The op table: every op of ir/ops.def must have a row `<name>_row` (defined beside its
// kernels); a missing row is a link error, a misplaced one fails the check below.
#include "ops/op_table.h"

#include <array>

namespace tpu {

#define OP(name, ...) extern const OpInfo name##_row;
#include "ir/ops.def"
#undef OP

namespace {
const std::array<const OpInfo*, kNumOps> kRows = {
#define OP(name, ...) &name##_row,
#include "ir/ops.def"
#undef OP
};

bool rows_in_order() {
  for (size_t i = 0; i < kRows.size(); ++i)
    if (kRows[i]->op != Op(i) || !kRows[i]->shape || !kRows[i]->reference || !kRows[i]->cost) return false;
  return true;
}
const bool kRowsChecked = [] {
  if (!rows_in_order()) throw std::logic_error("op table rows out of order with ops.def");
  return true;
}();
}  // namespace

const OpInfo& op_info(Op op) { return *kRows[size_t(op)]; }

Kernel kernel_for(Op op) {
  const OpInfo& info = op_info(op);
  return info.fast ? info.fast : info.reference;
}

void GradContext::give(size_t i, NodeId grad) {
  if (!needs(i)) return;
  NodeId& slot = input_grads.at(i);
  slot = slot < 0 ? grad : g.binary(Op::add, slot, grad);
}

}  // namespace tpu
