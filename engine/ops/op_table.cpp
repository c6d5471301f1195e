// The op table: every op of ir/ops.def must have a row `<name>_row` (defined beside its
// kernels); a missing row is a link error, a misplaced one fails the check below.
#include "ops/op_table.h"

#include <array>
#include <stdexcept>

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

// The first row that is misplaced or inconsistent, as a message; "" when all are right.
std::string table_problem() {
  for (size_t i = 0; i < kRows.size(); ++i) {
    if (kRows[i]->op != Op(i)) return "the row of " + std::string(op_name(Op(i))) + " is out of order with ops.def";
    std::string p = row_problem(*kRows[i]);
    if (!p.empty()) return std::string(op_name(Op(i))) + ": " + p;
  }
  return "";
}
const bool kRowsChecked = [] {
  std::string p = table_problem();
  if (!p.empty()) throw std::logic_error("op table: " + p);
  return true;
}();

std::string fused_problem(const OpInfo& r) {
  using Kind = FusedForm::Kind;
  const Kind form = r.fused.kind;
  if (form != Kind::none && !r.elementwise()) return "a fused form needs the elementwise trait";
  if ((form == Kind::unary) != (r.fused.unary != nullptr)) return "the unary form needs its chunk loop, and only it";
  if ((form == Kind::binary) != (r.fused.binary != nullptr)) return "the binary form needs its chunk loop, and only it";
  if (form == Kind::unary && !operand_count_problem(r.op, 1).empty()) return "the unary form on an op not of one operand";
  if (form == Kind::binary && !operand_count_problem(r.op, 2).empty()) return "the binary form on an op not of two operands";
  return "";
}
}  // namespace

std::string row_problem(const OpInfo& r) {
  if (!r.shape || !r.reference || !r.cost) return "a row needs a shape rule, a reference kernel and a cost";
  if (r.cheap() && !r.elementwise()) return "the cheap trait is for elementwise ops";
  if (r.elementwise() && r.has(kInPlace)) return "elementwise implies in place";
  if (r.elementwise() && !r.foldable()) return "an elementwise op folds like any other";
  return fused_problem(r);
}

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
