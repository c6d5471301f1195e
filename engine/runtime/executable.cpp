#include "runtime/executable.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "core/error.h"
#include "passes/pass.h"

namespace tpu {

namespace {

bool is_leaf(Op op) { return op == Op::parameter || op == Op::constant; }

bool reads_elementwise(Op op) {
  switch (op) {
    case Op::fusion: case Op::neg: case Op::exp: case Op::log: case Op::sqrt: case Op::rsqrt:
    case Op::tanh: case Op::logistic: case Op::abs: case Op::add: case Op::sub: case Op::mul:
    case Op::div: case Op::max: case Op::min: case Op::pow: case Op::compare: case Op::select:
    case Op::convert:
      return true;
    default:
      return false;
  }
}

size_t host_bytes(const Node& n) { return (size_t(num_elements(n.shape)) * size_of(n.dtype) + 63) / 64 * 64; }

bool profiling = false;
std::array<OpTime, kNumOps> times;

}  // namespace

void set_op_profiling(bool on) { profiling = on; }
bool op_profiling() { return profiling; }

std::vector<OpTime> op_times() {
  std::vector<OpTime> r;
  for (int i = 0; i < kNumOps; ++i)
    if (times[size_t(i)].calls) {
      r.push_back(times[size_t(i)]);
      r.back().op = std::string(op_name(Op(i)));
    }
  std::sort(r.begin(), r.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return r;
}

Executable Executable::compile(Graph g, CompileOptions options) {
  std::string problem = verify_graph(g);
  if (!problem.empty()) throw Error("invalid graph '" + g.name + "': " + problem);
  PipelineOptions po;
  po.enabled = options.optimize;
  po.observe = options.observe;
  Executable exe;
  exe.graph_ = run_pipeline(std::move(g), po);
  if (options.optimize) {
    problem = verify_graph(exe.graph_);
    if (!problem.empty()) throw Error("the pass pipeline broke '" + exe.graph_.name + "': " + problem);
  }
  exe.reference_kernels_ = options.reference_kernels;
  exe.plan(options);
  return exe;
}

void Executable::plan(const CompileOptions& options) {
  const Graph& g = graph_;
  const size_t count = g.nodes.size();
  std::vector<bool> live(count, false), is_output(count, false);
  for (NodeId o : g.outputs) live[size_t(o)] = is_output[size_t(o)] = true;
  for (size_t n = count; n-- > 0;)
    if (live[n])
      for (NodeId i : g.nodes[n].in) live[size_t(i)] = true;

  // Schedule and storage owners: a reshape shares its operand's storage.
  std::vector<NodeId> owner(count), order;
  std::vector<int32_t> pos(count, -1), last_use(count, -1);
  for (NodeId n = 0; n < NodeId(count); ++n) {
    owner[size_t(n)] = n;
    const Node& node = g.at(n);
    if (!live[size_t(n)] || is_leaf(node.op)) continue;
    if (node.op == Op::reshape && !is_output[size_t(n)]) owner[size_t(n)] = owner[size_t(node.in[0])];
    pos[size_t(n)] = int32_t(order.size());
    order.push_back(n);
    for (NodeId i : node.in) last_use[size_t(owner[size_t(i)])] = pos[size_t(n)];
  }
  const int32_t end = int32_t(order.size());
  for (NodeId o : g.outputs) last_use[size_t(owner[size_t(o)])] = end;  // results outlive the run

  // Donation: a result may take a donated parameter's buffer once nothing else reads it.
  std::vector<int32_t> donated_into(count, -1);
  std::vector<bool> taken(g.params.size(), false);
  for (NodeId o : g.outputs) {
    const Node& on = g.at(o);
    if (is_leaf(on.op) || owner[size_t(o)] != o || donated_into[size_t(o)] >= 0) continue;
    for (size_t p = 0; p < g.params.size() && p < options.donated.size(); ++p) {
      NodeId pn = g.params[p];
      if (!options.donated[p] || taken[p] || is_output[size_t(pn)] || host_bytes(g.at(pn)) != host_bytes(on)) continue;
      int32_t lu = last_use[size_t(pn)];
      bool in_place_ok = lu < pos[size_t(o)] ||
                         (lu == pos[size_t(o)] && reads_elementwise(on.op) && g.at(pn).shape == on.shape);
      if (!in_place_ok) continue;
      taken[p] = true;
      donated_into[size_t(o)] = int32_t(p);
      donated_args_.push_back(int32_t(p));
      break;
    }
  }

  std::vector<bool> planned(count, false);
  for (NodeId n : order) planned[size_t(n)] = owner[size_t(n)] == n && !is_output[size_t(n)];
  plan_ = plan_memory(g, order, planned, last_use);
  std::vector<size_t> offset(count, 0);
  for (const Buffer& b : plan_.buffers) offset[size_t(b.node)] = b.offset;

  for (NodeId n : order) {
    Step s{n, Step::Place::fresh};
    if (owner[size_t(n)] != n) s.place = Step::Place::alias;
    else if (planned[size_t(n)]) s.place = Step::Place::arena, s.offset = offset[size_t(n)];
    else if (donated_into[size_t(n)] >= 0) s.place = Step::Place::donated, s.arg = donated_into[size_t(n)];
    schedule_.push_back(s);
  }

  hbm_bytes_ = plan_.peak_tpu_bytes;
  for (NodeId p : g.params) hbm_bytes_ += tpu_padded_bytes(g.at(p).dtype, g.at(p).shape);
  for (NodeId o : g.outputs)
    if (!is_leaf(g.at(o).op) && donated_into[size_t(o)] < 0) hbm_bytes_ += tpu_padded_bytes(g.at(o).dtype, g.at(o).shape);
}

Cost Executable::cost() const {
  Cost total;
  for (const Step& s : schedule_) {
    if (s.place == Step::Place::alias) continue;
    Cost c = op_info(graph_.at(s.node).op).cost(graph_, graph_.at(s.node));
    total.flops += c.flops;
    total.bytes += c.bytes;
  }
  return total;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> args) const {
  const Graph& g = graph_;
  if (args.size() != g.params.size())
    throw Error("'" + g.name + "' takes " + std::to_string(g.params.size()) + " arguments, got " + std::to_string(args.size()));
  if (arena_.bytes() < plan_.arena_bytes) arena_ = Tensor(DType::u8, {int64_t(plan_.arena_bytes)}, Tensor::Uninitialized{});
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
    switch (s.place) {
      case Step::Place::alias: out = values[size_t(node.in[0])].reshaped(node.shape); continue;
      case Step::Place::arena: out = Tensor::borrow(node.dtype, node.shape, arena_.raw() + s.offset); break;
      case Step::Place::donated: out = args[size_t(s.arg)].view(node.dtype, node.shape); break;
      case Step::Place::fresh: out = Tensor(node.dtype, node.shape, Tensor::Uninitialized{}); break;
    }
    inputs.clear();
    for (NodeId i : node.in) inputs.push_back(&values[size_t(i)]);
    Kernel k = reference_kernels_ ? op_info(node.op).reference : kernel_for(node.op);
    auto t0 = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    try {
      k(node, inputs, out);
    } catch (const Error& e) {
      std::string where = g.location_of(s.node);
      throw Error((where.empty() ? "" : where + ": ") + std::string(op_name(node.op)) + ": " + e.what());
    }
    if (profiling) {
      OpTime& t = times[size_t(node.op)];
      t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++t.calls;
    }
  }
  std::vector<Tensor> results;
  for (NodeId o : g.outputs) results.push_back(values[size_t(o)]);
  return results;
}

}  // namespace tpu
