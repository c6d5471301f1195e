// A pass maps a graph to a graph and says whether it changed anything. One pass, one file.
#pragma once
#include <functional>
#include <string>

#include "ir/graph.h"

namespace tpu {

struct PassResult {
  Graph graph;
  bool changed = false;
};

using PassFn = PassResult (*)(const Graph& g);

struct Pass {
  const char* name;
  PassFn run;
};

PassResult dead_code_elimination(const Graph& g);
PassResult common_subexpression_elimination(const Graph& g);
PassResult constant_folding(const Graph& g);
PassResult algebraic_simplification(const Graph& g);
PassResult elementwise_fusion(const Graph& g);

struct PipelineOptions {
  bool enabled = true;
  int max_rounds = 8;  // of the cleanup passes, until nothing changes
  // Called with each stage's graph ("input", then each pass that changed something).
  std::function<void(const std::string& stage, const Graph& g)> observe;
};

// The compile pipeline: cleanup passes to a fixed point, then fusion, then DCE.
Graph run_pipeline(Graph g, const PipelineOptions& options = {});

// Users of each node (ids of the nodes that read it), in order.
std::vector<std::vector<NodeId>> users_of(const Graph& g);

}  // namespace tpu
