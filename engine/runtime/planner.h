// The planner's stages, in the order Executable::compile runs them on the optimized graph
// (TPUTRAIN_DEBUG=2 prints each one's time on the line of the plan):
//
//   1. liveness         which nodes the outputs need; which are the same on every replica
//   2. schedule         execution order: by all_reduce phase, then invariant / per-replica /
//                       all_reduce nodes; lock-step runs (fusions, reductions, a conv's
//                       readers) moved together (runtime/lockstep.h)
//   3. lifetimes        storage owners (a reshape shares its operand's) and each one's last read
//   4. donation         results that take a donated parameter's buffer
//   5. lock-step reads  a lock-step run reads its operands until its last member has run
//   6. offsets          arena offsets from the lifetimes (runtime/memory_plan.h); a fusion,
//                       a pool's gradient or a scatter_add that reads an operand last writes
//                       over it
//   7. steps            the phases' step lists (Executable)
//   8. HBM              what a core holds at the peak (Executable)
//
// Every stage is linear in the graph's size, or n log n: bench/compile_fit_depth.lua compiles
// models of thousands of layers through fit.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace tpu {

// 1. Per node: needed by an output; is an output.
struct Liveness {
  std::vector<bool> live, is_output;
};
Liveness liveness(const Graph& g);

// Per node: the same on every replica (unsharded parameters, constants, all_reduce results and
// whatever is computed from those alone). sharded: per parameter.
std::vector<bool> replica_invariant(const Graph& g, const std::vector<bool>& sharded);

// dot_of[a]: the dot an all_reduce `a` computes itself, or -1. That is a per-replica f32 dot
// read by `a` alone: its replicas' products are then summed as they are produced, instead of
// each replica writing a whole weight-gradient-sized product that a pass of its own sums.
std::vector<NodeId> summed_dots(const Graph& g, const Liveness& lv, const std::vector<bool>& invariant);

// 2. The computed (non-leaf) live nodes in execution order.
struct Schedule {
  std::vector<NodeId> order;
  std::vector<int32_t> slot;  // per node: phase * 3 + group (0 invariant, 1 per replica, 2 all_reduce); -1 unscheduled
  int32_t phases = 0;         // rounds of all_reduce + 1
  std::vector<int32_t> runs;  // per position: > 0 where a run of that many lock-step members starts
  static int32_t phase(int32_t slot) { return slot / 3; }
  static int32_t group(int32_t slot) { return slot % 3; }
};
Schedule schedule(const Graph& g, const Liveness& lv, const std::vector<bool>& invariant, bool lockstep);

// 3. Where each value lives and until when.
struct Lifetimes {
  std::vector<NodeId> owner;      // per node: the node whose storage holds it (itself, or a reshape's operand's owner)
  std::vector<int32_t> pos;       // per node: schedule position, -1 unscheduled
  std::vector<int32_t> last_use;  // per owner: the last position reading it; order.size() for a result
};
Lifetimes lifetimes(const Graph& g, std::span<const NodeId> order, const Liveness& lv,
                    const std::vector<bool>& invariant, const std::vector<NodeId>& dot_of);

// 4. Donation: each result, in output order, takes the first donated parameter's buffer of its
// size that nothing reads after it (or that it reads itself, element by element, at its own
// shape). into[n]: the parameter index result n is written into, or -1; args: those
// parameters, in output order.
struct Donation {
  std::vector<int32_t> into;
  std::vector<int32_t> args;
};
struct DonationRules {
  const std::vector<bool>& donated;  // per parameter (may be shorter: the rest are not)
  const std::vector<bool>& sharded;  // per parameter
  const std::vector<bool>& invariant;
  bool (*reads_elementwise)(Op);     // op reads each operand element by element
};
Donation donate(const Graph& g, const Lifetimes& lt, const Liveness& lv, const DonationRules& rules);

// 5. A lock-step run reads its members' operands until its last member has run.
void extend_for_lockstep(const Graph& g, const Schedule& s, Lifetimes& lt);

}  // namespace tpu
