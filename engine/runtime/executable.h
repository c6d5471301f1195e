// A compiled graph: verified, pruned to what the outputs need, with a buffer plan that reuses
// intermediate storage by liveness, run on host tensors.
//
//   Executable exe = Executable::compile(std::move(graph));
//   std::vector<Tensor> results = exe.run(arguments);
#pragma once
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tpu {

struct CompileOptions {
  bool reference_kernels = false;  // run every op on its reference kernel (tests)
};

class Executable {
 public:
  static Executable compile(Graph g, CompileOptions options = {});

  std::vector<Tensor> run(std::span<const Tensor> args) const;

  const Graph& graph() const { return graph_; }
  size_t planned_bytes() const { return slot_bytes_total_; }  // intermediate storage
  size_t num_kernels() const { return schedule_.size(); }

 private:
  struct Step {
    NodeId node;
    int32_t slot;        // -1: fresh allocation (outputs)
    NodeId alias = -1;   // reshape of this node's value: no copy
  };
  Graph graph_;
  CompileOptions options_;
  std::vector<Step> schedule_;
  std::vector<size_t> slot_bytes_;
  size_t slot_bytes_total_ = 0;
  mutable std::vector<Tensor> slots_;  // storage kept across runs
};

}  // namespace tpu
