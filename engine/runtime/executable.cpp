#include "runtime/executable.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "ops/collective.h"
#include "ops/fusion.h"
#include "passes/pass.h"
#include "runtime/lockstep.h"
#include "runtime/signals.h"
#include "runtime/thread_pool.h"

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

size_t exact_bytes(const Node& n) { return size_t(num_elements(n.shape)) * size_of(n.dtype); }


bool profiling = false;
std::array<OpTime, kNumOps> times;
std::mutex times_mutex;  // guards times

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

namespace {
// TPUTRAIN_DEBUG=2 prints the time of each compile stage (the pipeline prints its passes).
class StageTimer {
 public:
  StageTimer() {
    const char* v = std::getenv("TPUTRAIN_DEBUG");
    on_ = v && std::atoi(v) >= 2;
  }
  void done(const char* stage, size_t nodes) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "compile %-33s %8.2f ms  %zu nodes\n", stage,
                 std::chrono::duration<double, std::milli>(now - start_).count(), nodes);
    start_ = now;
  }

 private:
  bool on_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

Executable Executable::compile(Graph g, CompileOptions options) {
  StageTimer timer;
  std::string problem = verify_graph(g);
  if (!problem.empty()) throw Error("invalid graph '" + g.name + "': " + problem);
  timer.done("verify input", g.nodes.size());
  PipelineOptions po;
  po.enabled = options.optimize;
  po.observe = options.observe;
  Executable exe;
  exe.graph_ = run_pipeline(std::move(g), po);
  timer.done("pipeline", exe.graph_.nodes.size());
  if (options.optimize) {
    problem = verify_graph(exe.graph_);
    if (!problem.empty()) throw Error("the pass pipeline broke '" + exe.graph_.name + "': " + problem);
    timer.done("verify result", exe.graph_.nodes.size());
  }
  exe.reference_kernels_ = options.reference_kernels;
  poll_stop("compiling");
  exe.plan(options);
  timer.done("plan", exe.graph_.nodes.size());
  return exe;
}

namespace {

// Nodes whose value is the same on every replica: unsharded parameters, constants, all_reduce
// results, and whatever is computed from those alone.
std::vector<bool> replica_invariant(const Graph& g, const std::vector<bool>& sharded) {
  std::vector<bool> inv(g.nodes.size(), true);
  std::vector<int32_t> param_index(g.nodes.size(), -1);
  for (size_t i = 0; i < g.params.size(); ++i) param_index[size_t(g.params[i])] = int32_t(i);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    if (node.op == Op::parameter) {
      int32_t p = param_index[size_t(n)];
      inv[size_t(n)] = !(p >= 0 && size_t(p) < sharded.size() && sharded[size_t(p)]);
    } else if (node.op != Op::all_reduce) {
      for (NodeId i : node.in) inv[size_t(n)] = inv[size_t(n)] && inv[size_t(i)];
    }
  }
  return inv;
}

// phase[n]: how many rounds of all_reduce must finish before n can run.
// (Operands' ops are read from one flat array: on deep graphs each g.at(i) was a cache miss.)
std::vector<int32_t> phases_of(const Graph& g) {
  std::vector<int32_t> phase(g.nodes.size(), 0), after(g.nodes.size(), 0);  // after: phase of n's readers
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    for (NodeId i : node.in) phase[size_t(n)] = std::max(phase[size_t(n)], after[size_t(i)]);
    after[size_t(n)] = phase[size_t(n)] + (node.op == Op::all_reduce ? 1 : 0);
  }
  return phase;
}

// dot_of[a]: the dot an all_reduce `a` computes itself, or -1. That is a per-replica f32 dot
// read by `a` alone: its replicas' products are then summed as they are produced, instead of
// each replica writing a whole weight-gradient-sized product that a pass of its own sums.
std::vector<NodeId> summed_dots(const Graph& g, const std::vector<bool>& live, const std::vector<bool>& invariant,
                                const std::vector<bool>& is_output) {
  std::vector<int32_t> readers(g.nodes.size(), 0);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (live[size_t(n)])
      for (NodeId i : g.at(n).in) ++readers[size_t(i)];
  std::vector<NodeId> dot_of(g.nodes.size(), -1);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (!live[size_t(n)] || g.at(n).op != Op::all_reduce) continue;
    NodeId d = g.at(n).in[0];
    if (summable_dot(g, g.at(d)) && !invariant[size_t(d)] && !is_output[size_t(d)] && readers[size_t(d)] == 1)
      dot_of[size_t(n)] = d;
  }
  return dot_of;
}

}  // namespace

void Executable::plan(const CompileOptions& options) {
  const Graph& g = graph_;
  const size_t count = g.nodes.size();
  replicas_ = std::max(1, options.replicas);
  sharded_ = options.sharded;
  sharded_.resize(g.params.size(), false);
  invariant_ = replica_invariant(g, sharded_);
  std::vector<bool> live(count, false), is_output(count, false);
  for (NodeId o : g.outputs) live[size_t(o)] = is_output[size_t(o)] = true;
  for (size_t n = count; n-- > 0;)
    if (live[n])
      for (NodeId i : g.nodes[n].in) live[size_t(i)] = true;
  std::vector<NodeId> dot_of(count, -1);
  if (replicas_ > 1 && !options.reference_kernels) dot_of = summed_dots(g, live, invariant_, is_output);

  // Execution order: by phase; within a phase invariant nodes, per-replica nodes, all_reduces.
  std::vector<int32_t> phase = phases_of(g);
  int32_t phases = 0;
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (live[size_t(n)]) phases = std::max(phases, phase[size_t(n)] + 1);
  auto group = [&](NodeId n) { return g.at(n).op == Op::all_reduce ? 2 : invariant_[size_t(n)] ? 0 : 1; };
  // One sweep sorts the scheduled nodes by (phase, group), stably: a counting sort.
  std::vector<int32_t> slot(count, -1), first(size_t(phases) * 3 + 1, 0);
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (live[size_t(n)] && !is_leaf(g.at(n).op)) ++first[size_t(slot[size_t(n)] = phase[size_t(n)] * 3 + group(n)) + 1];
  for (size_t s = 1; s < first.size(); ++s) first[s] += first[s - 1];
  std::vector<NodeId> order(size_t(first.back()));
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (slot[size_t(n)] >= 0) order[size_t(first[size_t(slot[size_t(n)])]++)] = n;
  std::vector<int32_t> runs(order.size(), 0);
  if (!options.reference_kernels && options.lockstep) {
    order = sink_into_readers(g, order, slot);
    runs = lockstep_runs(g, order, slot);
  }

  // Storage owners: a reshape shares its operand's storage.
  std::vector<NodeId> owner(count);
  std::vector<int32_t> pos(count, -1), last_use(count, -1);
  for (NodeId n = 0; n < NodeId(count); ++n) owner[size_t(n)] = n;
  for (int32_t k = 0; k < int32_t(order.size()); ++k) {
    NodeId n = order[size_t(k)];
    const Node& node = g.at(n);
    if (node.op == Op::reshape && !is_output[size_t(n)] && invariant_[size_t(n)] == invariant_[size_t(node.in[0])])
      owner[size_t(n)] = owner[size_t(node.in[0])];
    pos[size_t(n)] = k;
    for (NodeId i : node.in) last_use[size_t(owner[size_t(i)])] = std::max(last_use[size_t(owner[size_t(i)])], k);
    if (dot_of[size_t(n)] >= 0)  // the all_reduce reads its dot's operands
      for (NodeId i : g.at(dot_of[size_t(n)]).in)
        last_use[size_t(owner[size_t(i)])] = std::max(last_use[size_t(owner[size_t(i)])], k);
  }
  const int32_t end = int32_t(order.size());
  for (NodeId o : g.outputs) last_use[size_t(owner[size_t(o)])] = end;  // results outlive the run

  // Donation: a result may take a donated parameter's buffer once nothing else reads it.
  std::vector<int32_t> donated_into(count, -1);
  std::vector<bool> taken(g.params.size(), false);
  for (NodeId o : g.outputs) {
    poll_stop("compiling");  // this search takes seconds for a model of 30,000 layers
    const Node& on = g.at(o);
    if (is_leaf(on.op) || owner[size_t(o)] != o || donated_into[size_t(o)] >= 0 || !invariant_[size_t(o)]) continue;
    for (size_t p = 0; p < g.params.size() && p < options.donated.size(); ++p) {
      NodeId pn = g.params[p];
      if (!options.donated[p] || taken[p] || is_output[size_t(pn)] || sharded_[p] ||
          exact_bytes(g.at(pn)) != exact_bytes(on))
        continue;
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

  // A run in lock-step reads its operands until its last member has run.
  for (size_t k = 0; k < order.size(); ++k)
    for (int32_t j = 0; j < runs[k]; ++j)
      for (NodeId i : g.at(order[k + size_t(j)]).in)
        last_use[size_t(owner[size_t(i)])] = std::max(last_use[size_t(owner[size_t(i)])], int32_t(k) + runs[k] - 1);

  // Replicas run their steps concurrently, each at its own pace: a value they all read (an
  // invariant one, an all_reduce result) gets an arena of its own, or replica 0 could reuse its
  // space while another replica still reads it.
  auto shared = [&](NodeId n) { return replicas_ > 1 && (invariant_[size_t(n)] || g.at(n).op == Op::all_reduce); };
  std::vector<bool> planned(count, false), planned_shared(count, false);
  for (NodeId n : order)
    (shared(n) ? planned_shared : planned)[size_t(n)] = owner[size_t(n)] == n && !is_output[size_t(n)];
  plan_ = plan_memory(g, order, planned, last_use);
  shared_plan_ = plan_memory(g, order, planned_shared, last_use);
  std::vector<size_t> offset(count, 0);
  for (const MemoryPlan* mp : {&plan_, &shared_plan_})
    for (const Buffer& b : mp->buffers) offset[size_t(b.node)] = b.offset;

  // A summed dot keeps its buffer in the plan (a TPU core holds its product before the
  // all_reduce, and the HBM check counts it) but is computed by its all_reduce.
  std::vector<bool> summed(count, false);
  for (NodeId d : dot_of)
    if (d >= 0) summed[size_t(d)] = true;
  phases_.assign(size_t(phases), Phase{});
  std::vector<int32_t> arg_of(count, -1);
  for (size_t p = 0; p < g.params.size(); ++p) arg_of[size_t(g.params[p])] = int32_t(p);
  auto where = [&](NodeId n) {
    const NodeId o = owner[size_t(n)];
    const size_t bytes = exact_bytes(g.at(o));
    if (planned[size_t(o)]) return BufferRange{-1, offset[size_t(o)], offset[size_t(o)] + bytes};
    if (planned_shared[size_t(o)]) return BufferRange{-2, offset[size_t(o)], offset[size_t(o)] + bytes};
    const int32_t arg = donated_into[size_t(o)] >= 0 ? donated_into[size_t(o)] : arg_of[size_t(o)];
    if (arg >= 0) return BufferRange{arg, 0, bytes};
    return BufferRange{-3 - int64_t(o), 0, bytes};  // a buffer of its own
  };
  for (size_t k = 0; k < order.size(); ++k)
    if (runs[k] > 0 && !lockstep_safe(g, std::span(order).subspan(k, size_t(runs[k])), where)) runs[k] = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const NodeId n = order[k];
    Step st{n, Step::Place::fresh};
    st.lockstep = runs[k];
    lockstep_fusions_ += size_t(runs[k]);
    st.dot = dot_of[size_t(n)];
    if (owner[size_t(n)] != n) st.place = Step::Place::alias;
    else if (planned[size_t(n)]) st.place = Step::Place::arena, st.offset = offset[size_t(n)];
    else if (planned_shared[size_t(n)]) st.place = Step::Place::shared, st.offset = offset[size_t(n)];
    else if (donated_into[size_t(n)] >= 0) st.place = Step::Place::donated, st.arg = donated_into[size_t(n)];
    Phase& ph = phases_[size_t(phase[size_t(n)])];
    kernels_ += st.place == Step::Place::alias ? 0 : 1;
    if (summed[size_t(n)]) continue;
    (group(n) == 0 ? ph.once : group(n) == 1 ? ph.each : ph.reduce).push_back(st);
  }

  hbm_bytes_ = plan_.peak_tpu_bytes + shared_plan_.peak_tpu_bytes;
  for (NodeId p : g.params) hbm_bytes_ += tpu_padded_bytes(g.at(p).dtype, g.at(p).shape);
  for (NodeId o : g.outputs)
    if (!is_leaf(g.at(o).op) && donated_into[size_t(o)] < 0) hbm_bytes_ += tpu_padded_bytes(g.at(o).dtype, g.at(o).shape);
}

Cost Executable::cost() const {
  Cost total;
  for (const Phase& ph : phases_)
    for (const auto* list : {&ph.once, &ph.each, &ph.reduce})
      for (const Step& s : *list) {
        if (s.place == Step::Place::alias) continue;
        for (NodeId n : {s.node, s.dot}) {
          if (n < 0) continue;
          Cost c = op_info(graph_.at(n).op).cost(graph_, graph_.at(n));
          total.flops += c.flops;
          total.bytes += c.bytes;
        }
      }
  return total;
}

int cross_process_count = 1;

namespace {

// Runs f(), which computes node `id`: its errors name the node's place in the script, its time
// goes to the node's op when profiling.
template <class F>
void run_kernel(const Graph& g, NodeId id, F f) {
  const Node& node = g.at(id);
  auto t0 = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  try {
    f();
  } catch (const Error& e) {
    std::string where = g.location_of(id);
    throw Error((where.empty() ? "" : where + ": ") + std::string(op_name(node.op)) + ": " + e.what());
  }
  if (profiling) {
    std::lock_guard lock(times_mutex);
    OpTime& t = times[size_t(node.op)];
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++t.calls;
  }
}

}  // namespace

// Points values[s.node] at the storage the plan gave it on `replica`. Results that differ per
// replica are written into their rows of the stacked result.
bool Executable::place_output(const Step& s, std::vector<Tensor>& values, std::span<const Tensor> args, int replica,
                              std::vector<Tensor>& results) const {
  const Node& node = graph_.at(s.node);
  Tensor& out = values[size_t(s.node)];
  switch (s.place) {
    case Step::Place::alias: out = values[size_t(node.in[0])].reshaped(node.shape); return false;
    case Step::Place::arena: out = Tensor::borrow(node.dtype, node.shape, arenas_[size_t(replica)].raw() + s.offset); break;
    case Step::Place::shared: out = Tensor::borrow(node.dtype, node.shape, shared_arena_.raw() + s.offset); break;
    case Step::Place::donated: out = args[size_t(s.arg)].view(node.dtype, node.shape); break;
    case Step::Place::fresh:
      out = results[size_t(s.node)].raw() && !invariant_[size_t(s.node)]
                ? results[size_t(s.node)].rows(replica, 1).reshaped(node.shape)
                : Tensor(node.dtype, node.shape, Tensor::Uninitialized{});
      break;
  }
  return true;
}

size_t Executable::run_steps(std::span<const Step> steps, size_t i, std::vector<Tensor>& values,
                             std::span<const Tensor> args, int replica, std::vector<Tensor>& results) const {
  const Graph& g = graph_;
  const Step& s = steps[i];
  if (s.lockstep > 0) {
    const auto run = steps.subspan(i, size_t(s.lockstep));
    for (const Step& m : run) place_output(m, values, args, replica, results);
    // Operand lists per member, in one reused array: no allocation per step.
    thread_local std::vector<const Tensor*> operands;
    thread_local std::vector<FusionCall> calls;
    operands.clear();
    calls.clear();
    for (const Step& m : run)
      for (NodeId in : g.at(m.node).in) operands.push_back(&values[size_t(in)]);
    size_t at = 0;
    for (const Step& m : run) {
      const size_t n = g.at(m.node).in.size();
      calls.push_back({&g.at(m.node), std::span<const Tensor* const>(operands).subspan(at, n), &values[size_t(m.node)]});
      at += n;
    }
    run_kernel(g, s.node, [&] { run_fusions_in_lockstep(calls); });
    return run.size();
  }
  if (!place_output(s, values, args, replica, results)) return 1;
  thread_local std::vector<const Tensor*> inputs;  // reused: no allocation per step
  inputs.clear();
  for (NodeId in : g.at(s.node).in) inputs.push_back(&values[size_t(in)]);
  Kernel k = reference_kernels_ ? op_info(g.at(s.node).op).reference : kernel_for(g.at(s.node).op);
  run_kernel(g, s.node, [&] { k(g.at(s.node), inputs, values[size_t(s.node)]); });
  return 1;
}

// Combines the replicas' values into replica 0's, then every replica reads that one.
void Executable::run_reduce(const Step& s, std::vector<std::vector<Tensor>>& values) const {
  const Graph& g = graph_;
  const Node& node = g.at(s.node);
  const size_t R = values.size();
  Tensor& out = values[0][size_t(s.node)];
  out = s.place == Step::Place::shared ? Tensor::borrow(node.dtype, node.shape, shared_arena_.raw() + s.offset)
                                       : Tensor(node.dtype, node.shape, Tensor::Uninitialized{});
  thread_local std::vector<const Tensor*> lhs, rhs;  // reused: no allocation per step
  lhs.clear();
  rhs.clear();
  if (s.dot >= 0) {
    const Node& dot = g.at(s.dot);
    for (size_t r = 0; r < R; ++r) {
      lhs.push_back(&values[r][size_t(dot.in[0])]);
      rhs.push_back(&values[r][size_t(dot.in[1])]);
    }
    run_kernel(g, s.dot, [&] { sum_dots(dot, lhs, rhs, out); });
  } else {
    for (size_t r = 0; r < R; ++r) lhs.push_back(&values[r][size_t(node.in[0])]);
    combine_replicas(lhs, out);
  }
  if (cross_process_reduce) cross_process_reduce(node, out);
  if (node.attrs.axis == 1) divide_by_count(out, int64_t(R) * cross_process_count);
  for (size_t r = 1; r < R; ++r) values[r][size_t(s.node)] = out;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> args) const {
  const Graph& g = graph_;
  const int R = replicas_;
  if (args.size() != g.params.size())
    throw Error("'" + g.name + "' takes " + std::to_string(g.params.size()) + " arguments, got " + std::to_string(args.size()));
  if (arenas_.size() != size_t(R)) arenas_.assign(size_t(R), Tensor());
  auto ensure = [](Tensor& a, size_t bytes) {
    if (a.bytes() < bytes || !a.raw()) a = Tensor(DType::u8, {int64_t(std::max<size_t>(bytes, 1))}, Tensor::Uninitialized{});
  };
  for (Tensor& a : arenas_) ensure(a, plan_.arena_bytes);
  if (shared_plan_.arena_bytes > 0) ensure(shared_arena_, shared_plan_.arena_bytes);

  std::vector<std::vector<Tensor>> values(size_t(R), std::vector<Tensor>(g.nodes.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Node& p = g.at(g.params[i]);
    Shape want = p.shape;
    if (sharded_[i] && !want.empty()) want[0] *= R;
    if (args[i].dtype() != p.dtype || args[i].shape() != want)
      throw Error("argument " + std::to_string(i + 1) + " of '" + g.name + "' should be " + type_str(p.dtype, want) +
                  ", got " + type_str(args[i].dtype(), args[i].shape()));
    for (int r = 0; r < R; ++r)
      values[size_t(r)][size_t(g.params[i])] = sharded_[i] ? args[i].rows(r * p.shape[0], p.shape[0]) : args[i];
  }
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (g.at(n).op == Op::constant)
      for (int r = 0; r < R; ++r) values[size_t(r)][size_t(n)] = *g.at(n).attrs.literal();

  // Per-replica results are written straight into their rows of a stacked tensor.
  std::vector<Tensor> stacked(g.nodes.size());
  for (NodeId o : g.outputs)
    if (!invariant_[size_t(o)] && R > 1 && !stacked[size_t(o)].raw()) {
      Shape s = g.at(o).shape;
      s.insert(s.begin(), R);
      stacked[size_t(o)] = Tensor(g.at(o).dtype, s, Tensor::Uninitialized{});
    }

  for (const Phase& ph : phases_) {
    for (size_t i = 0; i < ph.once.size();) {
      const size_t end = i + run_steps(ph.once, i, values[0], args, 0, stacked);
      for (; i < end; ++i)
        for (int r = 1; r < R; ++r) values[size_t(r)][size_t(ph.once[i].node)] = values[0][size_t(ph.once[i].node)];
    }
    // Each thread takes a run of replicas and steps them op by op (each op for all of them,
    // then the next): the replicas read the same weights, which then stay in the thread's
    // cache from one replica to the next. Every replica computes exactly what it would alone.
    const int64_t groups = std::min<int64_t>(R, num_threads());
    parallel_for(groups, [&](int64_t group) {
      const int first = int(group * R / groups), last = int((group + 1) * R / groups);
      for (size_t i = 0; i < ph.each.size();) {
        size_t ran = 1;
        for (int r = first; r < last; ++r) ran = run_steps(ph.each, i, values[size_t(r)], args, r, stacked);
        i += ran;
      }
    });
    for (const Step& s : ph.reduce) run_reduce(s, values);
  }
  std::vector<Tensor> results;
  for (NodeId o : g.outputs) results.push_back(stacked[size_t(o)].raw() ? stacked[size_t(o)] : values[0][size_t(o)]);
  return results;
}

std::function<void(const Node&, Tensor&)> cross_process_reduce;

}  // namespace tpu
