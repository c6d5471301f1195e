#include "runtime/executable.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "ops/op_table.h"

namespace tpu {

namespace {

std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (NodeId o : g.outputs) live[size_t(o)] = true;
  for (size_t n = g.nodes.size(); n-- > 0;)
    if (live[n])
      for (NodeId i : g.nodes[n].in) live[size_t(i)] = true;
  return live;
}

size_t padded_bytes(const Node& n) {
  size_t b = size_t(num_elements(n.shape)) * size_of(n.dtype);
  return (b + 63) / 64 * 64;
}

bool is_leaf(Op op) { return op == Op::parameter || op == Op::constant; }

}  // namespace

Executable Executable::compile(Graph g, CompileOptions options) {
  std::string problem = verify_graph(g);
  if (!problem.empty()) throw Error("invalid graph '" + g.name + "': " + problem);
  Executable exe;
  exe.options_ = options;
  std::vector<bool> live = live_nodes(g);
  std::vector<bool> is_output(g.nodes.size(), false);
  for (NodeId o : g.outputs) is_output[size_t(o)] = true;

  // A reshape shares its operand's storage; liveness is tracked on the storage owner.
  std::vector<NodeId> owner(g.nodes.size());
  std::vector<NodeId> last_use(g.nodes.size(), -1);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    owner[size_t(n)] = n;
    if (!live[size_t(n)]) continue;
    const Node& node = g.at(n);
    if (node.op == Op::reshape && !is_output[size_t(n)]) owner[size_t(n)] = owner[size_t(node.in[0])];
    for (NodeId i : node.in) last_use[size_t(owner[size_t(i)])] = n;
    last_use[size_t(owner[size_t(n)])] = std::max(last_use[size_t(owner[size_t(n)])], n);
  }

  std::multimap<size_t, int32_t> free_slots;  // bytes -> slot
  std::vector<std::vector<NodeId>> dying(g.nodes.size());
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (live[size_t(n)] && owner[size_t(n)] == n && last_use[size_t(n)] >= 0) dying[size_t(last_use[size_t(n)])].push_back(n);
  std::vector<int32_t> slot_of(g.nodes.size(), -1);

  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (!live[size_t(n)]) continue;
    const Node& node = g.at(n);
    Step step{n, -1, -1};
    if (owner[size_t(n)] != n) {
      step.alias = node.in[0];
    } else if (!is_leaf(node.op) && !is_output[size_t(n)]) {
      size_t bytes = padded_bytes(node);
      auto it = free_slots.find(bytes);
      if (it != free_slots.end()) {
        step.slot = it->second;
        free_slots.erase(it);
      } else {
        step.slot = int32_t(exe.slot_bytes_.size());
        exe.slot_bytes_.push_back(bytes);
        exe.slot_bytes_total_ += bytes;
      }
      slot_of[size_t(n)] = step.slot;
    }
    if (!is_leaf(node.op)) exe.schedule_.push_back(step);
    // Storage whose last reader is n can be reused by the nodes after n.
    for (NodeId d : dying[size_t(n)])
      if (slot_of[size_t(d)] >= 0) free_slots.emplace(exe.slot_bytes_[size_t(slot_of[size_t(d)])], slot_of[size_t(d)]);
  }
  exe.graph_ = std::move(g);
  return exe;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> args) const {
  const Graph& g = graph_;
  if (args.size() != g.params.size())
    throw Error("'" + g.name + "' takes " + std::to_string(g.params.size()) + " arguments, got " + std::to_string(args.size()));
  if (slots_.size() != slot_bytes_.size()) {
    slots_.clear();
    for (size_t b : slot_bytes_) slots_.emplace_back(DType::u8, Shape{int64_t(b)});
  }
  std::vector<Tensor> values(g.nodes.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Node& p = g.at(g.params[i]);
    if (args[i].dtype() != p.dtype || args[i].shape() != p.shape)
      throw Error("argument " + std::to_string(i + 1) + " of '" + g.name + "' should be " +
                  type_str(p.dtype, p.shape) + ", got " + type_str(args[i].dtype(), args[i].shape()));
    values[size_t(g.params[i])] = args[i];
  }
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (g.at(n).op == Op::constant) values[size_t(n)] = *g.at(n).attrs.literal;

  std::vector<const Tensor*> inputs;
  for (const Step& s : schedule_) {
    const Node& node = g.at(s.node);
    Tensor& out = values[size_t(s.node)];
    if (s.alias >= 0) {
      out = values[size_t(s.alias)].reshaped(node.shape);
      continue;
    }
    out = s.slot >= 0 ? slots_[size_t(s.slot)].view(node.dtype, node.shape)
                      : Tensor(node.dtype, node.shape, Tensor::Uninitialized{});
    inputs.clear();
    for (NodeId i : node.in) inputs.push_back(&values[size_t(i)]);
    const OpInfo& info = op_info(node.op);
    Kernel k = (info.fast && !options_.reference_kernels) ? info.fast : info.reference;
    try {
      k(node, inputs, out);
    } catch (const Error& e) {
      std::string where = g.location_of(s.node);
      throw Error((where.empty() ? "" : where + ": ") + std::string(op_name(node.op)) + ": " + e.what());
    }
  }
  std::vector<Tensor> results;
  for (NodeId o : g.outputs) results.push_back(values[size_t(o)]);
  return results;
}

}  // namespace tpu
