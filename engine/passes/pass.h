// A pass maps a graph to a graph and says whether it changed anything. One pass, one file.
#pragma once
#include <functional>
#include <span>
#include <string>

#include "ir/graph.h"

namespace tpu {

struct PassResult {
  Graph graph;
  bool changed = false;
};

// A pass takes its graph by value so that one with nothing to do can hand it back as it came:
// on deep graphs copying every node was most of the compile time.
using PassFn = PassResult (*)(Graph g);

struct Pass {
  const char* name;
  PassFn run;
  bool idempotent = false;  // a second run right after one changes nothing
  // It changes a graph only by removing nodes no result reads. The other cleanup passes look
  // at a node and its operands, never at its readers, so one at its fixed point stays there.
  bool removes_dead_only = false;
};

PassResult dead_code_elimination(Graph g);
PassResult common_subexpression_elimination(Graph g);
PassResult constant_folding(Graph g);
PassResult algebraic_simplification(Graph g);
PassResult elementwise_fusion(Graph g);
PassResult dot_layout(Graph g);

struct PipelineOptions {
  bool enabled = true;
  int max_rounds = 8;  // of the cleanup passes, until nothing changes
  // Called with each stage's graph ("input", then each pass that changed something).
  std::function<void(const std::string& stage, const Graph& g)> observe;
  // Called after each pass that ran, with whether it changed the graph.
  std::function<void(const char* pass, bool changed)> ran;
};

// The compile pipeline: dot layout, cleanup passes to a fixed point, then fusion, then DCE.
Graph run_pipeline(Graph g, const PipelineOptions& options = {});

// The cleanup passes the pipeline runs to a fixed point, in order.
std::span<const Pass> cleanup_passes();

// Users of each node (ids of the nodes that read it, each once, in order), in one flat array
// (a vector per node cost an allocation per node on deep graphs).
struct Users {
  std::vector<int32_t> start;  // users of n: ids[start[n] .. start[n + 1])
  std::vector<NodeId> ids;
  std::span<const NodeId> of(NodeId n) const {
    return {ids.data() + start[size_t(n)], ids.data() + start[size_t(n) + 1]};
  }
};
Users users_of(const Graph& g);

}  // namespace tpu
