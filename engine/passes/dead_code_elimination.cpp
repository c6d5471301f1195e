// DCE: drops nodes no output depends on. Parameters stay (they are the signature).
#include <algorithm>

#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

PassResult dead_code_elimination(Graph g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (NodeId o : g.outputs) live[size_t(o)] = true;
  for (NodeId p : g.params) live[size_t(p)] = true;
  for (size_t n = g.nodes.size(); n-- > 0;)
    if (live[n])
      for (NodeId i : g.nodes[n].in) live[size_t(i)] = true;
  if (std::find(live.begin(), live.end(), false) == live.end()) return {std::move(g), false};
  Rewriter rw(g, Rewriter::in_place);  // nodes only drop out
  bool changed = false;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (live[size_t(n)]) rw.take(n);
    else changed = true;
  }
  return {rw.finish(), changed};
}

Users users_of(const Graph& g) {
  const size_t count = g.nodes.size();
  Users u{std::vector<int32_t>(count + 1, 0), {}};
  std::vector<NodeId> last(count, -1);  // the latest user counted, so a node reading x twice counts once
  for (NodeId n = 0; n < NodeId(count); ++n)
    for (NodeId i : g.at(n).in)
      if (last[size_t(i)] != n) last[size_t(i)] = n, ++u.start[size_t(i) + 1];
  for (size_t k = 1; k <= count; ++k) u.start[k] += u.start[k - 1];
  u.ids.resize(size_t(u.start[count]));
  std::vector<int32_t> fill(u.start.begin(), u.start.end() - 1);
  std::fill(last.begin(), last.end(), -1);
  for (NodeId n = 0; n < NodeId(count); ++n)
    for (NodeId i : g.at(n).in)
      if (last[size_t(i)] != n) last[size_t(i)] = n, u.ids[size_t(fill[size_t(i)]++)] = n;
  return u;
}

}  // namespace tpu
