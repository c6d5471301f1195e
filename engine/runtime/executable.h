// A compiled graph: the pass pipeline applied, verified, pruned, with a memory plan that puts
// every intermediate at an offset of one arena (allocated once, reused every run), and
// optionally donated parameters whose buffers receive results in place.
//
//   Executable exe = Executable::compile(std::move(graph));
//   std::vector<Tensor> results = exe.run(arguments);
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/scoped_flag.h"
#include "ir/graph.h"
#include "ops/op_table.h"
#include "runtime/memory_plan.h"

namespace tpu {

class StageTimer;  // prints each compile stage's time under TPUTRAIN_DEBUG=2

struct CompileOptions {
  bool reference_kernels = false;  // run every op on its reference kernel (tests)
  bool optimize = true;            // run the pass pipeline
  bool lockstep = true;            // run fusions of one shape in lock-step (runtime/lockstep.h)
  std::vector<bool> donated;       // per parameter: its buffer may receive a result
  // Replicated execution (SPMD): the graph is one replica's program. Sharded parameters get
  // rows [r*b, (r+1)*b) of their argument on replica r (b = the parameter's leading dim);
  // the others are the same on every replica. all_reduce nodes combine the replicas.
  int replicas = 1;
  std::vector<bool> sharded;       // per parameter
  // Sees the graph before ("input") and after each pass that changed it.
  std::function<void(const std::string& stage, const Graph& g)> observe;
};

// A constant the HBM count holds: a tensor (a scalar is an immediate operand of its kernel).
inline bool held_constant(const Node& n) { return n.op == Op::constant && !n.shape.empty(); }

class Executable {
 public:
  static Executable compile(Graph g, CompileOptions options = {});

  // Runs the graph. Arguments whose buffers were donated hold results afterwards: the caller
  // must treat them as consumed (see donated_args()). A sharded argument holds all replicas'
  // rows. A result that differs between replicas comes back stacked: [replicas, ...].
  // Callable from any thread; concurrent runs of one executable take turns.
  std::vector<Tensor> run(std::span<const Tensor> args) const;

  int replicas() const { return replicas_; }
  bool output_per_replica(size_t i) const { return !invariant_[size_t(graph_.outputs[i])]; }

  const Graph& graph() const { return graph_; }
  // Per-replica intermediates, and (several replicas only) the values every replica reads.
  const MemoryPlan& memory_plan() const { return plan_; }
  const MemoryPlan& shared_memory_plan() const { return shared_plan_; }
  size_t planned_bytes() const { return plan_.arena_bytes + shared_plan_.arena_bytes; }
  size_t num_kernels() const { return kernels_; }
  // Nodes that run in lock-step with others (runtime/lockstep.h): fusions, and reductions with
  // the fusion they read.
  size_t lockstep_members() const { return lockstep_members_; }
  // Parameters whose buffers receive a result.
  const std::vector<int32_t>& donated_args() const { return donated_args_; }
  // HBM a core needs under the tile-padding model: parameters, constants, peak intermediates,
  // results.
  size_t hbm_bytes() const { return hbm_bytes_; }
  Cost cost() const;

 private:
  struct Step {
    NodeId node;
    enum class Place : uint8_t { arena, shared, fresh, alias, donated } place;
    size_t offset = 0;   // arena or shared
    int32_t arg = -1;    // donated: the parameter index
    NodeId dot = -1;     // an all_reduce of a per-replica dot that it computes itself
    int32_t lockstep = 0;  // > 0: the first of that many members run in lock-step (runtime/lockstep.h)
  };
  // Steps between two rounds of all_reduce: the replica-invariant ones run once, then the
  // per-replica ones on every replica (in parallel), then the all_reduces. A per-replica dot
  // whose only reader is an all_reduce is no step of its own: the all_reduce computes every
  // replica's product and sums them as they come (Step::dot).
  struct Phase {
    std::vector<Step> once, each, reduce;
  };
  // The planner (runtime/planner.h): its stages, each timed under TPUTRAIN_DEBUG=2.
  struct Planning;
  void plan(const CompileOptions& options, StageTimer& timer);
  void assign_offsets(Planning& p);
  void emit_steps(Planning& p);
  void count_hbm(const Planning& p);
  // Points values[s.node] at its storage; false for an alias (a reshape: nothing to compute).
  bool place_output(const Step& s, std::vector<Tensor>& values, std::span<const Tensor> args, int replica,
                    std::vector<Tensor>& results) const;
  // Runs steps[i] (or the lock-step run it starts); returns how many steps that was.
  size_t run_steps(std::span<const Step> steps, size_t i, std::vector<Tensor>& values, std::span<const Tensor> args,
                   int replica, std::vector<Tensor>& results) const;
  void run_reduce(const Step& s, std::vector<std::vector<Tensor>>& values) const;

  Graph graph_;
  bool reference_kernels_ = false;
  std::vector<Phase> phases_;
  size_t kernels_ = 0;
  size_t lockstep_members_ = 0;
  int replicas_ = 1;
  std::vector<bool> invariant_;  // per node: the same on every replica
  std::vector<bool> sharded_;    // per parameter
  MemoryPlan plan_, shared_plan_;
  std::vector<int32_t> donated_args_;
  size_t hbm_bytes_ = 0;
  mutable std::vector<Tensor> arenas_;  // one per replica, allocated on first run
  mutable Tensor shared_arena_;
  // Runs share the arenas, so one runs at a time: a data set's map may run on the prefetch
  // thread while the caller's thread runs it too (element_spec). A pointer keeps this movable.
  std::unique_ptr<std::mutex> run_mutex_ = std::make_unique<std::mutex>();
};

// Set by a multi-worker runtime: combines an all_reduce result (already summed over this
// process's replicas) with the other processes', in a fixed order.
extern std::function<void(const Node&, Tensor&)> cross_process_reduce;
extern int cross_process_count;  // processes taking part (1 without multi-worker)

// Per-op execution time, collected while profiling is on (for --profile).
void set_op_profiling(bool on);
struct OpTime {
  std::string op;
  double seconds = 0;
  int64_t calls = 0;
};
std::vector<OpTime> op_times();  // most time first
// The same time per kernel: its place in the script ("script.lua:12 (dense_1)"), op and result
// type, with each kernel's first run apart (it pays one-time set-up, such as making a oneDNN
// primitive, which would otherwise read as the kernel's own cost).
struct KernelTime {
  std::string where, op, type;
  double seconds = 0;        // runs after the first
  int64_t calls = 0;         // runs after the first
  double first_seconds = 0;  // the first run
};
std::vector<KernelTime> kernel_times();  // most time (after the first run) first
// While one lives, kernels run on this thread stay out of op_times: a data set's maps on the
// prefetch thread run beside the step, and op_times is where the caller's time goes.
class OpTimesExcluded : ScopedFlag {
 public:
  OpTimesExcluded();
};

}  // namespace tpu
