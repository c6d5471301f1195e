// DCE: drops nodes no output depends on. Parameters stay (they are the signature).
#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

PassResult dead_code_elimination(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (NodeId o : g.outputs) live[size_t(o)] = true;
  for (NodeId p : g.params) live[size_t(p)] = true;
  for (size_t n = g.nodes.size(); n-- > 0;)
    if (live[n])
      for (NodeId i : g.nodes[n].in) live[size_t(i)] = true;
  Rewriter rw(g);
  bool changed = false;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (live[size_t(n)]) rw.copy(n);
    else changed = true;
  }
  return {rw.finish(), changed};
}

std::vector<std::vector<NodeId>> users_of(const Graph& g) {
  std::vector<std::vector<NodeId>> users(g.nodes.size());
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    for (NodeId i : g.at(n).in)
      if (users[size_t(i)].empty() || users[size_t(i)].back() != n) users[size_t(i)].push_back(n);
  return users;
}

}  // namespace tpu
