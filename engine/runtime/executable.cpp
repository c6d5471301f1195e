#include "runtime/executable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "ops/collective.h"
#include "ops/fusion.h"
#include "ops/reduce_window.h"
#include "passes/pass.h"
#include "runtime/debug_level.h"
#include "runtime/lockstep.h"
#include "runtime/planner.h"
#include "runtime/signals.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

bool is_leaf(Op op) { return op == Op::parameter || op == Op::constant; }

bool reads_elementwise(Op op) { return op_info(op).writes_in_place(); }

size_t exact_bytes(const Node& n) { return size_t(num_elements(n.shape)) * size_of(n.dtype); }


std::atomic<bool> profiling{false};  // kernels may run on the prefetch thread too
thread_local bool excluded = false;  // OpTimesExcluded
std::array<OpTime, kNumOps> times;
// Per kernel, by its label (place, op, type): graphs come and go (an eager op's lives for one
// call), so their addresses cannot name a kernel.
struct KernelRuns {
  double seconds = 0, first_seconds = 0;
  int64_t calls = 0;  // after the first
};
std::map<std::tuple<std::string, std::string, std::string>, KernelRuns> kernel_time_of;
std::mutex times_mutex;  // guards times and kernel_time_of

}  // namespace

void set_op_profiling(bool on) { profiling = on; }

OpTimesExcluded::OpTimesExcluded() : ScopedFlag(excluded) {}

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

std::vector<KernelTime> kernel_times() {
  std::lock_guard lock(times_mutex);
  std::vector<KernelTime> r;
  for (const auto& [label, runs] : kernel_time_of) {
    const auto& [where, op, type] = label;
    r.push_back({where, op, type, runs.seconds, runs.calls, runs.first_seconds});
  }
  std::stable_sort(r.begin(), r.end(), [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  return r;
}

// TPUTRAIN_DEBUG=2 prints the time of each compile stage (the pipeline prints its passes); a
// stage made of parts (the planner's) prints them on its line.
class StageTimer {
 public:
  StageTimer() : on_(debug_level() >= 2) {}
  // A part of the current stage ends.
  void part(const char* name) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", parts_.empty() ? "" : ", ", name, ms(part_start_, now));
    parts_ += buf;
    part_start_ = now;
  }
  void done(const char* stage, size_t nodes) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "compile %-33s %8.2f ms  %zu nodes%s%s\n", stage, ms(start_, now), nodes,
                 parts_.empty() ? "" : ": ", parts_.c_str());
    start_ = part_start_ = now;
    parts_.clear();
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
  bool on_ = false;
  Clock::time_point start_ = Clock::now(), part_start_ = start_;
  std::string parts_;
};

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
  exe.plan(options, timer);
  return exe;
}

// What the planner's stages (runtime/planner.h) hand each other.
struct Executable::Planning {
  Liveness lv;
  std::vector<NodeId> dot_of;  // per all_reduce: the dot it computes itself, or -1
  Schedule sched;
  Lifetimes lt;
  std::vector<int32_t> last_reader;  // per owner: its last reader's position (lt's before lock-step runs extend it)
  Donation donation;
  std::vector<bool> planned, planned_shared;  // per node: has an offset in plan_ / shared_plan_
  std::vector<size_t> offset;
};

void Executable::plan(const CompileOptions& options, StageTimer& timer) {
  const Graph& g = graph_;
  const size_t count = g.nodes.size();
  replicas_ = std::max(1, options.replicas);
  sharded_ = options.sharded;
  sharded_.resize(g.params.size(), false);
  Planning p;
  invariant_ = replica_invariant(g, sharded_);
  p.lv = liveness(g);
  p.dot_of.assign(count, -1);
  if (replicas_ > 1 && !options.reference_kernels) p.dot_of = summed_dots(g, p.lv, invariant_);
  timer.part("liveness");
  p.sched = schedule(g, p.lv, invariant_, !options.reference_kernels && options.lockstep);
  timer.part("schedule");
  p.lt = lifetimes(g, p.sched.order, p.lv, invariant_, p.dot_of);
  timer.part("lifetimes");
  poll_stop("compiling");
  p.donation = donate(g, p.lt, p.lv, {options.donated, sharded_, invariant_, reads_elementwise});
  donated_args_ = p.donation.args;
  timer.part("donation");
  p.last_reader = p.lt.last_use;
  extend_for_lockstep(g, p.sched, p.lt);
  timer.part("lock-step reads");
  assign_offsets(p);
  timer.part("offsets");
  emit_steps(p);
  timer.part("steps");
  count_hbm(p);
  timer.part("HBM");
  timer.done("plan", count);
}

// Replicas run their steps concurrently, each at its own pace: a value they all read (an
// invariant one, an all_reduce result) gets an arena of its own, or replica 0 could reuse its
// space while another replica still reads it.
void Executable::assign_offsets(Planning& p) {
  const Graph& g = graph_;
  auto shared = [&](NodeId n) { return replicas_ > 1 && (invariant_[size_t(n)] || g.at(n).op == Op::all_reduce); };
  p.planned.assign(g.nodes.size(), false);
  p.planned_shared.assign(g.nodes.size(), false);
  for (NodeId n : p.sched.order)
    (shared(n) ? p.planned_shared : p.planned)[size_t(n)] = p.lt.owner[size_t(n)] == n && !p.lv.is_output[size_t(n)];
  // A fusion that reads an operand of its type element by element, and is its last reader,
  // writes over it (in a lock-step run too, where the operand lives on to the run's end); so
  // does a max pool's gradient over the pool's input, window by window, and a scatter_add over
  // its base when it reads that storage nowhere else (not as its indices or updates): it adds
  // its rows there instead of copying the base first (a gather's gradient into zeros).
  auto writes_over = [&](NodeId n, NodeId x) {
    const Node& w = g.at(n);
    if (w.dtype != g.at(x).dtype || p.last_reader[size_t(x)] != p.lt.pos[size_t(n)]) return false;
    if (w.op == Op::select_and_scatter) return x == w.in[0] && scatter_may_write_over_input(g, w);
    if (w.op == Op::scatter_add)
      return x == w.in[0] && p.lt.owner[size_t(w.in[1])] != x && p.lt.owner[size_t(w.in[2])] != x;
    return w.op == Op::fusion && reads_in_step(g, w, x);
  };
  plan_ = plan_memory(g, p.sched.order, p.planned, p.lt.last_use, writes_over);
  shared_plan_ = plan_memory(g, p.sched.order, p.planned_shared, p.lt.last_use, writes_over);
  p.offset.assign(g.nodes.size(), 0);
  for (const MemoryPlan* mp : {&plan_, &shared_plan_})
    for (const Buffer& b : mp->buffers) p.offset[size_t(b.node)] = b.offset;
}

// Lock-step runs whose buffers allow it, then each scheduled node's step in its phase's list.
void Executable::emit_steps(Planning& p) {
  const Graph& g = graph_;
  std::vector<int32_t>& runs = p.sched.runs;
  const std::vector<NodeId>& order = p.sched.order;
  std::vector<int32_t> arg_of(g.nodes.size(), -1);
  for (size_t a = 0; a < g.params.size(); ++a) arg_of[size_t(g.params[a])] = int32_t(a);
  auto where = [&](NodeId n) {
    const NodeId o = p.lt.owner[size_t(n)];
    const size_t bytes = exact_bytes(g.at(o));
    if (p.planned[size_t(o)]) return BufferRange{-1, p.offset[size_t(o)], p.offset[size_t(o)] + bytes};
    if (p.planned_shared[size_t(o)]) return BufferRange{-2, p.offset[size_t(o)], p.offset[size_t(o)] + bytes};
    const int32_t arg = p.donation.into[size_t(o)] >= 0 ? p.donation.into[size_t(o)] : arg_of[size_t(o)];
    if (arg >= 0) return BufferRange{arg, 0, bytes};
    return BufferRange{-3 - int64_t(o), 0, bytes};  // a buffer of its own
  };
  for (size_t k = 0; k < order.size(); ++k)
    if (runs[k] > 0 && !lockstep_safe(g, std::span(order).subspan(k, size_t(runs[k])), where)) runs[k] = 0;
  // A summed dot keeps its buffer in the plan (a TPU core holds its product before the
  // all_reduce, and the HBM check counts it) but is computed by its all_reduce.
  std::vector<bool> summed(g.nodes.size(), false);
  for (NodeId d : p.dot_of)
    if (d >= 0) summed[size_t(d)] = true;
  phases_.assign(size_t(p.sched.phases), Phase{});
  // Each list at its size first: grown by doubling, a deep model's lists took their memory
  // several times over, fresh each time (the stage 0.2 -> 9.6 ms from 1000 to 10000 layers).
  auto list_of = [&](int32_t slot) -> std::vector<Step>& {
    Phase& ph = phases_[size_t(Schedule::phase(slot))];
    const int32_t group = Schedule::group(slot);
    return group == 0 ? ph.once : group == 1 ? ph.each : ph.reduce;
  };
  std::vector<size_t> sizes(phases_.size() * 3, 0);  // per slot
  for (NodeId n : order)
    if (!summed[size_t(n)]) ++sizes[size_t(p.sched.slot[size_t(n)])];
  for (size_t slot = 0; slot < sizes.size(); ++slot) list_of(int32_t(slot)).reserve(sizes[slot]);
  for (size_t k = 0; k < order.size(); ++k) {
    const NodeId n = order[k];
    Step st{n, Step::Place::fresh};
    st.lockstep = runs[k];
    lockstep_members_ += size_t(runs[k]);
    st.dot = p.dot_of[size_t(n)];
    if (p.lt.owner[size_t(n)] != n) st.place = Step::Place::alias;
    else if (p.planned[size_t(n)]) st.place = Step::Place::arena, st.offset = p.offset[size_t(n)];
    else if (p.planned_shared[size_t(n)]) st.place = Step::Place::shared, st.offset = p.offset[size_t(n)];
    else if (p.donation.into[size_t(n)] >= 0) st.place = Step::Place::donated, st.arg = p.donation.into[size_t(n)];
    kernels_ += st.place == Step::Place::alias ? 0 : 1;
    if (!summed[size_t(n)]) list_of(p.sched.slot[size_t(n)]).push_back(st);
  }
}

// A core holds the parameters, the constants (a closed-over tensor is in HBM as much as an
// argument is), the peak of intermediates and the results not written into a parameter's buffer.
void Executable::count_hbm(const Planning& p) {
  const Graph& g = graph_;
  hbm_bytes_ = plan_.peak_tpu_bytes + shared_plan_.peak_tpu_bytes;
  for (NodeId n : g.params) hbm_bytes_ += tpu_padded_bytes(g.at(n).dtype, g.at(n).shape);
  for (const Node& n : g.nodes)
    if (held_constant(n)) hbm_bytes_ += tpu_padded_bytes(n.dtype, n.shape);
  for (NodeId o : g.outputs)
    if (!is_leaf(g.at(o).op) && p.donation.into[size_t(o)] < 0)
      hbm_bytes_ += tpu_padded_bytes(g.at(o).dtype, g.at(o).shape);
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

// Runs f(), which computes node `id`: its errors name the node's place in the script (after the
// message: the caller's line comes first), its time goes to the node's op when profiling.
template <class F>
void run_kernel(const Graph& g, NodeId id, F f) {
  const Node& node = g.at(id);
  const bool timed = profiling && !excluded;
  auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  try {
    f();
  } catch (const Error& e) {
    std::string where = g.location_of(id);
    throw Error(std::string(op_name(node.op)) + ": " + e.what() + (where.empty() ? "" : " (traced at " + where + ")"));
  }
  if (timed) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(times_mutex);
    OpTime& t = times[size_t(node.op)];
    t.seconds += seconds;
    ++t.calls;
    auto [it, first] = kernel_time_of.try_emplace({g.location_of(id), std::string(op_name(node.op)), type_str(node.dtype, node.shape)});
    KernelRuns& k = it->second;
    if (first) {
      k.first_seconds = seconds;
    } else {
      k.seconds += seconds;
      ++k.calls;
    }
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
    thread_local std::vector<LockstepCall> calls;
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
    run_kernel(g, s.node, [&] { run_in_lockstep(calls); });
    return run.size();
  }
  if (!place_output(s, values, args, replica, results)) return 1;
  // An empty result has nothing to compute; a kernel would still walk its other dims (a
  // window kernel over 2^39 output rows of 0 channels, say) for nothing.
  if (values[size_t(s.node)].size() == 0) return 1;
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
  if (node.mean()) divide_by_count(out, int64_t(R) * cross_process_count);
  for (size_t r = 1; r < R; ++r) values[r][size_t(s.node)] = out;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> args) const {
  std::lock_guard lock(*run_mutex_);
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

  // Per-replica results are written straight into their rows of a stacked tensor. A sharded
  // argument returned as it is runs no step: its rows are the replicas' already.
  std::vector<Tensor> stacked(g.nodes.size());
  for (NodeId o : g.outputs)
    if (!invariant_[size_t(o)] && R > 1 && !stacked[size_t(o)].raw()) {
      Shape s = g.at(o).shape;
      s.insert(s.begin(), R);
      const auto param = std::find(g.params.begin(), g.params.end(), o);
      stacked[size_t(o)] = param != g.params.end() ? args[size_t(param - g.params.begin())].reshaped(s)
                                                  : Tensor(g.at(o).dtype, s, Tensor::Uninitialized{});
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
