// The compile pipeline. Cleanup passes run in rounds until none changes the graph (each is
// linear in the graph, and rounds are capped), then fusion, then a last DCE.
#include "passes/pass.h"

namespace tpu {

namespace {
const Pass kCleanup[] = {
    {"constant_folding", constant_folding},
    {"algebraic_simplification", algebraic_simplification},
    {"common_subexpression_elimination", common_subexpression_elimination},
    {"dead_code_elimination", dead_code_elimination},
};
}  // namespace

Graph run_pipeline(Graph g, const PipelineOptions& options) {
  if (options.observe) options.observe("input", g);
  if (!options.enabled) return g;
  auto step = [&](const Pass& p) {
    PassResult r = p.run(g);
    if (r.changed) {
      g = std::move(r.graph);
      if (options.observe) options.observe(p.name, g);
    }
    return r.changed;
  };
  for (int round = 0; round < options.max_rounds; ++round) {
    bool changed = false;
    for (const Pass& p : kCleanup) changed |= step(p);
    if (!changed) break;
  }
  step({"elementwise_fusion", elementwise_fusion});
  step({"dead_code_elimination", dead_code_elimination});
  return g;
}

}  // namespace tpu
