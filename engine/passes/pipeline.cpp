// The compile pipeline. Dot layout, then cleanup passes in rounds until none changes the graph
// (each is linear in the graph, and rounds are capped), then fusion, then a last DCE. A cleanup
// pass is skipped while the graph is as its last run left it and that run changed nothing or
// the pass is idempotent: the graph is the same as if it had run. Dead code elimination's
// removals leave the others where they were (in a deep model's compile the first round's DCE
// drops a few nodes, and a second round of the other three changed nothing, over the whole graph).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <vector>

#include "passes/pass.h"
#include "runtime/debug_level.h"
#include "runtime/signals.h"

namespace tpu {

namespace {
const Pass kCleanup[] = {
    {"constant_folding", constant_folding},
    {"algebraic_simplification", algebraic_simplification},
    // One forward pass merges a node's duplicates after its operands', so none are left.
    {"common_subexpression_elimination", common_subexpression_elimination, true},
    {"dead_code_elimination", dead_code_elimination, true, true},
};
}  // namespace

std::span<const Pass> cleanup_passes() { return kCleanup; }

namespace {
// TPUTRAIN_DEBUG=2 prints each pass's time and the graph size after it.
bool trace_passes() { return debug_level() >= 2; }
}  // namespace

Graph run_pipeline(Graph g, const PipelineOptions& options) {
  if (options.observe) options.observe("input", g);
  if (!options.enabled) return g;
  auto step = [&](const Pass& p) {
    poll_stop("compiling");  // a signal stops a long compile (DESIGN section 11)
    auto t0 = std::chrono::steady_clock::now();
    const size_t before = g.nodes.size();
    PassResult r = p.run(std::move(g));
    g = std::move(r.graph);
    if (trace_passes())
      std::fprintf(stderr, "pass %-34s %8.2f ms  %zu -> %zu nodes%s\n", p.name,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                   before, g.nodes.size(), r.changed ? "" : "  (no change)");
    if (r.changed && options.observe) options.observe(p.name, g);
    if (options.ran) options.ran(p.name, r.changed);
    return r.changed;
  };
  step({"dot_layout", dot_layout});  // first: CSE then shares a transpose among its readers
  // The graph's version after each cleanup pass last ran (versions count changes), and
  // whether that run changed it.
  int64_t version = 0;
  std::vector<int64_t> ran_at(std::size(kCleanup), -1);
  std::vector<bool> ran_changed(std::size(kCleanup), false);
  for (int round = 0; round < options.max_rounds; ++round) {
    bool changed = false;
    for (size_t i = 0; i < std::size(kCleanup); ++i) {
      if (ran_at[i] == version && (kCleanup[i].idempotent || !ran_changed[i])) continue;
      const int64_t before = version;
      ran_changed[i] = step(kCleanup[i]);
      version += ran_changed[i] ? 1 : 0;
      ran_at[i] = version;
      if (ran_changed[i] && kCleanup[i].removes_dead_only)
        for (int64_t& at : ran_at) at = at == before ? version : at;
      changed = changed || ran_changed[i];
    }
    if (!changed) break;
  }
  step({"elementwise_fusion", elementwise_fusion});
  step({"dead_code_elimination", dead_code_elimination});
  return g;
}

}  // namespace tpu
