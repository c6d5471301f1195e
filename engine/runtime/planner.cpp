#include "runtime/planner.h"

#include <algorithm>
#include <map>

#include "ops/collective.h"
#include "runtime/lockstep.h"

namespace tpu {

namespace {

bool is_leaf(Op op) { return op == Op::parameter || op == Op::constant; }

size_t exact_bytes(const Node& n) { return size_t(num_elements(n.shape)) * size_of(n.dtype); }

// phase[n]: how many rounds of all_reduce must finish before n can run.
std::vector<int32_t> phases_of(const Graph& g) {
  std::vector<int32_t> phase(g.nodes.size(), 0), after(g.nodes.size(), 0);  // after: phase of n's readers
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    for (NodeId i : node.in) phase[size_t(n)] = std::max(phase[size_t(n)], after[size_t(i)]);
    after[size_t(n)] = phase[size_t(n)] + (node.op == Op::all_reduce ? 1 : 0);
  }
  return phase;
}

}  // namespace

Liveness liveness(const Graph& g) {
  const size_t count = g.nodes.size();
  Liveness lv{std::vector<bool>(count, false), std::vector<bool>(count, false)};
  for (NodeId o : g.outputs) lv.live[size_t(o)] = lv.is_output[size_t(o)] = true;
  for (size_t n = count; n-- > 0;)
    if (lv.live[n])
      for (NodeId i : g.nodes[n].in) lv.live[size_t(i)] = true;
  return lv;
}

std::vector<bool> replica_invariant(const Graph& g, const std::vector<bool>& sharded) {
  std::vector<bool> inv(g.nodes.size(), true);
  std::vector<int32_t> param_index(g.nodes.size(), -1);
  for (size_t i = 0; i < g.params.size(); ++i) param_index[size_t(g.params[i])] = int32_t(i);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    if (node.op == Op::parameter) {
      int32_t p = param_index[size_t(n)];
      inv[size_t(n)] = !(p >= 0 && size_t(p) < sharded.size() && sharded[size_t(p)]);
    } else if (node.op != Op::all_reduce) {
      for (NodeId i : node.in) inv[size_t(n)] = inv[size_t(n)] && inv[size_t(i)];
    }
  }
  return inv;
}

std::vector<NodeId> summed_dots(const Graph& g, const Liveness& lv, const std::vector<bool>& invariant) {
  std::vector<int32_t> readers(g.nodes.size(), 0);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (lv.live[size_t(n)])
      for (NodeId i : g.at(n).in) ++readers[size_t(i)];
  std::vector<NodeId> dot_of(g.nodes.size(), -1);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (!lv.live[size_t(n)] || g.at(n).op != Op::all_reduce) continue;
    NodeId d = g.at(n).in[0];
    if (summable_dot(g, g.at(d)) && !invariant[size_t(d)] && !lv.is_output[size_t(d)] && readers[size_t(d)] == 1)
      dot_of[size_t(n)] = d;
  }
  return dot_of;
}

Schedule schedule(const Graph& g, const Liveness& lv, const std::vector<bool>& invariant, bool lockstep) {
  const size_t count = g.nodes.size();
  const std::vector<int32_t> phase = phases_of(g);
  Schedule s;
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (lv.live[size_t(n)]) s.phases = std::max(s.phases, phase[size_t(n)] + 1);
  auto group = [&](NodeId n) { return g.at(n).op == Op::all_reduce ? 2 : invariant[size_t(n)] ? 0 : 1; };
  // One sweep sorts the scheduled nodes by slot, stably: a counting sort.
  s.slot.assign(count, -1);
  std::vector<int32_t> first(size_t(s.phases) * 3 + 1, 0);
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (lv.live[size_t(n)] && !is_leaf(g.at(n).op))
      ++first[size_t(s.slot[size_t(n)] = phase[size_t(n)] * 3 + group(n)) + 1];
  for (size_t k = 1; k < first.size(); ++k) first[k] += first[k - 1];
  s.order.resize(size_t(first.back()));
  for (NodeId n = 0; n < NodeId(count); ++n)
    if (s.slot[size_t(n)] >= 0) s.order[size_t(first[size_t(s.slot[size_t(n)])]++)] = n;
  s.runs.assign(s.order.size(), 0);
  if (lockstep) {
    s.order = pull_filter_grads(g, sink_into_readers(g, s.order, s.slot), s.slot);
    s.runs = lockstep_runs(g, s.order, s.slot);
  }
  return s;
}

Lifetimes lifetimes(const Graph& g, std::span<const NodeId> order, const Liveness& lv,
                    const std::vector<bool>& invariant, const std::vector<NodeId>& dot_of) {
  const size_t count = g.nodes.size();
  Lifetimes lt{std::vector<NodeId>(count), std::vector<int32_t>(count, -1), std::vector<int32_t>(count, -1)};
  for (NodeId n = 0; n < NodeId(count); ++n) lt.owner[size_t(n)] = n;
  auto read_at = [&](NodeId i, int32_t k) {
    int32_t& lu = lt.last_use[size_t(lt.owner[size_t(i)])];
    lu = std::max(lu, k);
  };
  for (int32_t k = 0; k < int32_t(order.size()); ++k) {
    const NodeId n = order[size_t(k)];
    const Node& node = g.at(n);
    if (node.op == Op::reshape && !lv.is_output[size_t(n)] && invariant[size_t(n)] == invariant[size_t(node.in[0])])
      lt.owner[size_t(n)] = lt.owner[size_t(node.in[0])];
    lt.pos[size_t(n)] = k;
    for (NodeId i : node.in) read_at(i, k);
    if (dot_of[size_t(n)] >= 0)  // the all_reduce reads its dot's operands
      for (NodeId i : g.at(dot_of[size_t(n)]).in) read_at(i, k);
  }
  // Results outlive the run.
  for (NodeId o : g.outputs) lt.last_use[size_t(lt.owner[size_t(o)])] = int32_t(order.size());
  return lt;
}

namespace {

// The donatable parameters of one byte size, in parameter order, with their last reads. The
// first one free before a position is found in log time, by descending a tree of minimums over
// the last reads: a search of every parameter for every result took seconds on deep models.
class Donors {
 public:
  void add(int32_t param, int32_t last_use) { params_.push_back(param), last_use_.push_back(last_use); }

  void build() {
    while (leaves_ < params_.size()) leaves_ *= 2;
    tree_.assign(2 * leaves_, kTaken);
    for (size_t k = 0; k < params_.size(); ++k) tree_[leaves_ + k] = last_use_[k];
    for (size_t i = leaves_; i-- > 1;) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
    for (size_t k = 0; k < params_.size(); ++k) read_at_.push_back({last_use_[k], k});
    std::sort(read_at_.begin(), read_at_.end());
  }

  // The first untaken one read last before `pos`, or npos.
  size_t free_before(int32_t pos) const {
    if (tree_[1] >= pos) return npos;
    size_t i = 1;
    while (i < leaves_) i = tree_[2 * i] < pos ? 2 * i : 2 * i + 1;
    return i - leaves_;
  }

  // The first untaken one read last at `pos` that fits(param), or npos.
  template <class Fits>
  size_t free_at(int32_t pos, Fits fits) const {
    auto it = std::lower_bound(read_at_.begin(), read_at_.end(), std::pair<int32_t, size_t>{pos, 0});
    for (; it != read_at_.end() && it->first == pos; ++it)
      if (tree_[leaves_ + it->second] != kTaken && fits(params_[it->second])) return it->second;
    return npos;
  }

  int32_t take(size_t k) {
    size_t i = leaves_ + k;
    tree_[i] = kTaken;
    for (i /= 2; i >= 1; i /= 2) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
    return params_[k];
  }

  static constexpr size_t npos = SIZE_MAX;

 private:
  static constexpr int32_t kTaken = INT32_MAX;
  std::vector<int32_t> params_, last_use_, tree_;
  std::vector<std::pair<int32_t, size_t>> read_at_;  // (last read, k), sorted
  size_t leaves_ = 1;
};

// Donatable parameters by byte size.
std::map<size_t, Donors> donors_by_size(const Graph& g, const Lifetimes& lt, const Liveness& lv,
                                        const DonationRules& rules) {
  std::map<size_t, Donors> by_size;
  for (size_t p = 0; p < g.params.size() && p < rules.donated.size(); ++p) {
    const NodeId pn = g.params[p];
    if (rules.donated[p] && !lv.is_output[size_t(pn)] && !rules.sharded[p])
      by_size[exact_bytes(g.at(pn))].add(int32_t(p), lt.last_use[size_t(pn)]);
  }
  for (auto& [bytes, d] : by_size) d.build();
  return by_size;
}

}  // namespace

Donation donate(const Graph& g, const Lifetimes& lt, const Liveness& lv, const DonationRules& rules) {
  Donation d{std::vector<int32_t>(g.nodes.size(), -1), {}};
  std::map<size_t, Donors> by_size = donors_by_size(g, lt, lv, rules);
  for (NodeId o : g.outputs) {
    const Node& on = g.at(o);
    if (is_leaf(on.op) || lt.owner[size_t(o)] != o || d.into[size_t(o)] >= 0 || !rules.invariant[size_t(o)]) continue;
    auto it = by_size.find(exact_bytes(on));
    if (it == by_size.end()) continue;
    Donors& donors = it->second;
    const int32_t pos = lt.pos[size_t(o)];
    // Free before o runs, or read by o itself element by element at o's shape: o may write
    // each element after reading it.
    size_t k = donors.free_before(pos);
    if (rules.reads_elementwise(on.op))
      k = std::min(k, donors.free_at(pos, [&](int32_t p) { return g.at(g.params[size_t(p)]).shape == on.shape; }));
    if (k == Donors::npos) continue;
    d.into[size_t(o)] = donors.take(k);
    d.args.push_back(d.into[size_t(o)]);
  }
  return d;
}

void extend_for_lockstep(const Graph& g, const Schedule& s, Lifetimes& lt) {
  for (size_t k = 0; k < s.order.size(); ++k)
    for (int32_t j = 0; j < s.runs[k]; ++j)
      for (NodeId i : g.at(s.order[k + size_t(j)]).in) {
        int32_t& lu = lt.last_use[size_t(lt.owner[size_t(i)])];
        lu = std::max(lu, int32_t(k) + s.runs[k] - 1);
      }
}

}  // namespace tpu
