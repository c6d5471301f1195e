// Elementwise fusion: chains of elementwise ops (and the broadcasts feeding them) become one
// `fusion` node whose kernel runs the chain block by block, so the intermediates are never
// materialised. A node joins its users' group when every user is in that one group and has
// its shape; broadcasts and scalar constants are cloned into each group that reads them, and
// so is a cheap op that reads one tensor and feeds several groups (a bias add read by the
// activation and by its gradient): recomputing it costs less than writing and reading it.
// Identical bodies are one body, shared by their fusion nodes. A group whose result only a
// reduce reads becomes that reduce's body instead: one `reduce_fusion` node, which never
// stores the result.
#include <algorithm>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "ir/node_equality.h"
#include "ops/op_table.h"
#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

bool is_elementwise(Op op) { return op_info(op).elementwise(); }

bool is_scalar_constant(const Node& n) { return n.op == Op::constant && n.shape.empty(); }

// Nodes that may be copied into a fusion body rather than read from memory.
bool clonable(const Graph& g, NodeId id) {
  const Node& n = g.at(id);
  if (is_scalar_constant(n)) return true;
  return n.op == Op::broadcast;
}

bool is_cheap(Op op) { return op_info(op).cheap(); }

constexpr int32_t kRecomputed = -2;  // group of a node cloned into each group that reads it

struct Groups {
  std::vector<int32_t> of;      // group of each node, -1 = none, or kRecomputed
  std::vector<NodeId> root;     // per group
  std::vector<int32_t> size;    // members per group
};

// Whether the tensors n reads come from one: some tensor s such that each operand, a broadcast
// or scalar aside, is s or a cheap op of n's shape whose own operands are so, in turn (at most
// 8 deep). Recomputed, n then reads s alone: x - mean reads x; GPT-2's 0.044715 u^2,
// (0.044715 u) u, read by the tanh's group and by the gradient's, reads u (the factor
// 0.044715 u is recomputed with it). The candidates for s are n's operands first, then what
// lies behind them, nearest first.
bool reads_one_tensor(const Graph& g, NodeId n) {
  const Shape& shape = g.at(n).shape;
  auto walkable = [&](NodeId i) {
    const Node& o = g.at(i);
    return is_elementwise(o.op) && is_cheap(o.op) && o.shape == shape;
  };
  std::vector<NodeId> candidates, frontier = {n};
  for (size_t k = 0; k < frontier.size() && candidates.size() < 16; ++k)
    for (NodeId i : g.at(frontier[k]).in) {
      if (clonable(g, i) || std::find(candidates.begin(), candidates.end(), i) != candidates.end()) continue;
      candidates.push_back(i);
      if (walkable(i)) frontier.push_back(i);
    }
  if (candidates.empty()) return true;  // broadcasts and scalars only
  for (NodeId source : candidates) {
    int budget = 64;  // nodes visited: a bound on the walk through a DAG
    auto from = [&](auto& self, NodeId m, int depth) -> bool {
      for (NodeId i : g.at(m).in) {
        if (clonable(g, i) || i == source) continue;
        if (!walkable(i) || depth == 8 || --budget < 0 || !self(self, i, depth + 1)) return false;
      }
      return true;
    };
    if (from(from, n, 0)) return true;
  }
  return false;
}

// A cheap op of one tensor operand (others broadcasts or scalars; or cheap ops on it, as
// reads_one_tensor says) whose users are all in groups of its shape, at least two of them, or
// recomputed themselves in such groups: each group recomputes it from that operand. Through
// recomputed users a chain goes in whole (a BatchNorm's x * inv + shift under a swish's
// sigmoid, read by the swish and its gradient).
bool recomputable(const Graph& g, const Groups& gr, const Users& users, NodeId n) {
  const Node& node = g.at(n);
  if (!is_cheap(node.op) || users.of(n).empty() || !reads_one_tensor(g, n)) return false;
  int32_t first = -1, visits = 0;
  bool several = false, ok = true;
  auto reach = [&](auto& self, NodeId u) -> void {
    const int32_t gu = gr.of[size_t(u)];
    if (!ok) return;
    if (gu == kRecomputed) {
      if (++visits > 64) return void(ok = false);  // a bound on the walk through a DAG of them
      for (NodeId w : users.of(u)) self(self, w);
      return;
    }
    if (gu < 0 || g.at(gr.root[size_t(gu)]).shape != node.shape) return void(ok = false);
    several = several || (first >= 0 && gu != first);
    first = gu;
  };
  for (NodeId u : users.of(n)) reach(reach, u);
  return ok && several;
}

// Who reads each node: its users, and whether the graph returns it.
struct Readers {
  Users users;
  std::vector<bool> is_output;
  explicit Readers(const Graph& g) : users(users_of(g)), is_output(g.nodes.size(), false) {
    for (NodeId o : g.outputs) is_output[size_t(o)] = true;
  }
};

Groups form_groups(const Graph& g, const Readers& readers) {
  const Users& users = readers.users;
  const std::vector<bool>& is_output = readers.is_output;
  Groups gr{std::vector<int32_t>(g.nodes.size(), -1), {}, {}};
  for (NodeId n = NodeId(g.nodes.size()) - 1; n >= 0; --n) {
    const Node& node = g.at(n);
    if (!is_elementwise(node.op)) continue;
    int32_t joined = -1;
    bool ok = !is_output[size_t(n)] && !users.of(n).empty();
    for (NodeId u : users.of(n)) {
      int32_t gu = gr.of[size_t(u)];
      if (gu < 0 || (joined >= 0 && gu != joined)) ok = false;
      joined = gu;
    }
    if (ok && g.at(gr.root[size_t(joined)]).shape == node.shape) {
      gr.of[size_t(n)] = joined;
      ++gr.size[size_t(joined)];
    } else if (!is_output[size_t(n)] && recomputable(g, gr, users, n)) {
      gr.of[size_t(n)] = kRecomputed;
    } else {
      gr.of[size_t(n)] = int32_t(gr.root.size());
      gr.root.push_back(n);
      gr.size.push_back(1);
    }
  }
  return gr;
}

// The members of each group in id order, in one flat array (a vector per group cost an
// allocation per group on deep graphs).
struct Members {
  std::vector<int32_t> start;  // members of group k: ids[start[k] .. start[k + 1])
  std::vector<NodeId> ids;
  std::span<const NodeId> of(int32_t k) const {
    return {ids.data() + start[size_t(k)], ids.data() + start[size_t(k) + 1]};
  }
};

Members members_of(const Graph& g, const Groups& gr) {
  Members m{std::vector<int32_t>(gr.root.size() + 1, 0), {}};
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (gr.of[size_t(n)] >= 0) ++m.start[size_t(gr.of[size_t(n)]) + 1];
  for (size_t k = 1; k < m.start.size(); ++k) m.start[k] += m.start[k - 1];
  m.ids.resize(size_t(m.start.back()));
  std::vector<int32_t> fill(m.start.begin(), m.start.end() - 1);
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
    if (gr.of[size_t(n)] >= 0) m.ids[size_t(fill[size_t(gr.of[size_t(n)])]++)] = n;
  return m;
}

// A group's fusion node before it is placed: its operands (nodes of the source graph) and its
// attributes (the interned body).
struct Outlined {
  Operands inputs;
  Attrs attrs;
};

// Builds the body of each group from the source graph, one body for each distinct fused
// computation: the layers of a deep model fuse into the same few bodies again and again (a
// 10000-layer MLP's 80000 fusions into a handful), and each body is a graph of its own, with a
// fusion program compiled for it at its first run. A group is first numbered as its body would
// be, without building it: its hash and a comparison with the bodies of that hash find the
// body it repeats, and only a new one is built (building each group's body first was most of
// the pass).
class Outliner {
 public:
  Outliner(const Graph& g, const Groups& gr) : g_(g), gr_(gr), local_(g.nodes.size(), -1) { body_.name = "fused"; }

  Outlined outline(int32_t group, std::span<const NodeId> members) {
    for (NodeId id : touched_) local_[size_t(id)] = -1;
    touched_.clear();
    slots_.clear();
    operands_.clear();
    Outlined o;
    inputs_ = &o.inputs;
    for (NodeId m : members) remember(m, number(m, group));
    const NodeId result = local_[size_t(gr_.root[size_t(group)])];
    std::vector<Attrs>& same_hash = by_hash_[hash(result)];
    for (const Attrs& a : same_hash)
      if (repeats(*a.body(), result)) {
        o.attrs = a;
        return o;
      }
    // The attributes of a fusion node of this body: their out-of-line block, which holds the
    // body, is shared by all such nodes too (one block per fusion node was 15 MB of fresh
    // memory in a 10000-layer model's compile).
    same_hash.emplace_back().set_body(std::make_shared<const Graph>(build(result)));
    o.attrs = same_hash.back();
    return o;
  }

 private:
  // A node of the body being numbered: node `source` of g, with its operands' body ids at
  // operands_[first, first + count), or (parameter) a parameter the fusion node fills with it.
  struct Slot {
    NodeId source;
    bool parameter;
    uint32_t first, count;
  };

  std::span<const NodeId> operands_of(const Slot& s) const { return {operands_.data() + s.first, s.count}; }

  // The body id of a copy of node `id` (a member, or a clone of a broadcast or scalar).
  NodeId number(NodeId id, int32_t group) {
    Operands in;
    for (NodeId i : g_.at(id).in) in.push_back(local(i, group));
    slots_.push_back(Slot{id, false, uint32_t(operands_.size()), uint32_t(in.size())});
    operands_.insert(operands_.end(), in.begin(), in.end());
    return NodeId(slots_.size() - 1);
  }

  void remember(NodeId id, NodeId made) {
    local_[size_t(id)] = made;
    touched_.push_back(id);
  }

  // The body node for `id`: a member, a clone of a broadcast/scalar, or a new parameter.
  NodeId local(NodeId id, int32_t group) {
    if (NodeId known = local_[size_t(id)]; known >= 0) return known;
    NodeId made;
    if (gr_.of[size_t(id)] == kRecomputed || (gr_.of[size_t(id)] != group && clonable(g_, id))) {
      made = number(id, group);
    } else {
      slots_.push_back(Slot{id, true, 0, 0});
      made = NodeId(slots_.size() - 1);
      inputs_->push_back(id);
    }
    remember(id, made);
    return made;
  }

  size_t hash(NodeId result) const {
    size_t h = hash_mix(slots_.size(), size_t(result));
    for (const Slot& s : slots_) {
      const Node& n = g_.at(s.source);
      if (s.parameter) {
        h = hash_mix(hash_mix(h, size_t(Op::parameter)), size_t(n.dtype));
        for (int64_t d : n.shape) h = hash_mix(h, size_t(d));
      } else {
        h = hash_mix(h, hash_node(n, operands_of(s)));
      }
    }
    return h;
  }

  // Whether `body` is the body numbered in slots_ (its parameters are numbered in order).
  bool repeats(const Graph& body, NodeId result) const {
    if (body.nodes.size() != slots_.size() || body.outputs.size() != 1 || body.outputs[0] != result) return false;
    for (size_t k = 0; k < slots_.size(); ++k) {
      const Node &b = body.nodes[k], &n = g_.at(slots_[k].source);
      if (slots_[k].parameter) {
        if (b.op != Op::parameter || b.dtype != n.dtype || b.shape != n.shape) return false;
      } else {
        const std::span<const NodeId> in = operands_of(slots_[k]);
        if (!std::equal(b.in.begin(), b.in.end(), in.begin(), in.end()) || !same_node_but_operands(b, n)) return false;
      }
    }
    return true;
  }

  // The body numbered in slots_. Its nodes' shapes and types were derived when they joined the
  // source graph, from operands of the shapes they have here, so their shape rules are not run
  // again.
  const Graph& build(NodeId result) {
    body_.nodes.truncate(0);  // built in one graph, its nodes' memory reused from body to body
    body_.params.clear();
    for (const Slot& s : slots_) {
      const Node& n = g_.at(s.source);
      if (s.parameter)
        body_.parameter(n.dtype, n.shape);
      else
        body_.nodes.push_back(Node{n.op, n.dtype, n.shape, Operands(operands_of(s)), n.attrs, -1});
    }
    body_.outputs = {result};
    return body_;
  }

  const Graph& g_;
  const Groups& gr_;
  Graph body_;
  std::unordered_map<size_t, std::vector<Attrs>> by_hash_;
  // Body node of each node of g in the group being numbered (-1: none yet); reset through
  // touched_, so numbering a group costs its own size, not the graph's.
  std::vector<NodeId> local_;
  std::vector<NodeId> touched_;
  std::vector<Slot> slots_;
  std::vector<NodeId> operands_;
  Operands* inputs_ = nullptr;
};

// What the rewrite does with each group, decided before it overwrites the nodes looked at.
struct Decisions {
  std::vector<bool> outline;     // per group: becomes a fusion (or a reduce_fusion's body)
  std::vector<int32_t> reduced;  // per node: the group a reduce takes in as its body, or -1
  std::vector<bool> in_reduce;   // per group: taken in by the reduce that alone reads it
};

Decisions decide(const Graph& g, const Groups& gr, const Readers& readers) {
  Decisions d{std::vector<bool>(gr.root.size(), false), std::vector<int32_t>(g.nodes.size(), -1),
              std::vector<bool>(gr.root.size(), false)};
  for (size_t grp = 0; grp < gr.root.size(); ++grp) {
    // A lone op is fused only when it reads a broadcast or a recomputed op it can absorb.
    const NodeId root = gr.root[grp];
    d.outline[grp] = gr.size[grp] > 1;
    for (NodeId i : g.at(root).in)
      d.outline[grp] = d.outline[grp] || g.at(i).op == Op::broadcast || gr.of[size_t(i)] == kRecomputed;
    // A result only a reduce reads goes into that reduce, which makes it tile by tile in cache
    // instead of storing it (a BatchNorm's statistics over its input and its squares).
    const auto users = readers.users.of(root);
    if (readers.is_output[size_t(root)] || users.size() != 1 || g.at(users[0]).op != Op::reduce ||
        g.at(root).dtype != DType::f32)
      continue;
    d.outline[grp] = d.in_reduce[grp] = true;
    d.reduced[size_t(users[0])] = int32_t(grp);
  }
  return d;
}

// The node of op `op` (fusion or reduce_fusion) for an outlined group, in place of `n`.
void place(Rewriter& rw, NodeId n, Op op, Outlined& o, int32_t loc) {
  for (NodeId& i : o.inputs) i = rw.map(i);
  Node fused{op, DType::f32, {}, std::move(o.inputs), std::move(o.attrs), loc};
  if (std::string problem = op_info(op).shape(rw.out(), fused); !problem.empty()) throw Error(problem);
  rw.replace(n, std::move(fused));
}

}  // namespace

PassResult elementwise_fusion(Graph g) {
  const Readers readers(g);
  Groups gr = form_groups(g, readers);
  const Members members = members_of(g, gr);
  const Decisions d = decide(g, gr, readers);
  // Every body first, from the source graph; then the graph is rewritten in place, each fusion
  // node where its root was. Rebuilding it in a second graph took fresh memory for all of it
  // (a 10000-layer model's compile: 30 MB of new pages).
  std::vector<Outlined> outlined(gr.root.size());
  {
    Outliner outliner(g, gr);
    for (int32_t grp = 0; grp < int32_t(gr.root.size()); ++grp)
      if (d.outline[size_t(grp)]) outlined[size_t(grp)] = outliner.outline(grp, members.of(grp));
  }
  Rewriter rw(g, Rewriter::in_place);  // a group's members before its root drop out
  bool changed = false;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const int32_t grp = gr.of[size_t(n)];
    if (const int32_t body = d.reduced[size_t(n)]; body >= 0) {
      Outlined& o = outlined[size_t(body)];
      o.attrs.set_dims(g.at(n).attrs.dims());
      o.attrs.axis = g.at(n).attrs.axis;
      place(rw, n, Op::reduce_fusion, o, g.at(n).loc);
      changed = true;
    } else if (grp < 0 || !d.outline[size_t(grp)]) {
      rw.take(n);
    } else if (gr.root[size_t(grp)] == n && !d.in_reduce[size_t(grp)]) {
      place(rw, n, Op::fusion, outlined[size_t(grp)], g.at(n).loc);
      changed = true;
    }
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
