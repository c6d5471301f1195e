#include "passes/rewriter.h"

#include "core/error.h"

namespace tpu {

namespace {

// A node that owns no heap memory (short lists inline, no rare attributes) is copied out of the
// source rather than moved: a move writes to the source node too, and on a deep graph all
// those dirtied lines go back to memory before the source is freed.
Node take_from(Node& n) {
  const bool owns_heap =
      n.attrs.has_rare() || !n.shape.is_inline() || !n.in.is_inline();
  if (owns_heap) return std::move(n);
  return n;
}

}  // namespace

Rewriter::Rewriter(const Graph& src) : src_(src), map_(src.nodes.size(), -1) {
  out_.name = src.name;
  out_.locations = src.locations;
  out_.location_ids = src.location_ids;
}

Rewriter::Rewriter(Graph& src) : Rewriter(static_cast<const Graph&>(src)) { movable_ = &src; }

Rewriter::Rewriter(Graph& src, InPlace)
    : src_(src), movable_(&src), in_place_(&src), source_params_(std::move(src.params)), map_(src.nodes.size(), -1) {
  src.params.clear();
}

Operands Rewriter::mapped_inputs(NodeId old) const {
  Operands in;
  in.reserve(src_.at(old).in.size());
  for (NodeId i : src_.at(old).in) {
    if (map_[size_t(i)] < 0) throw Error("rewriter: %" + std::to_string(i) + " used before it was emitted");
    in.push_back(map_[size_t(i)]);
  }
  return in;
}

const Node& Rewriter::mapped_node(NodeId old) {
  const Node& n = src_.at(old);
  scratch_.op = n.op;
  scratch_.dtype = n.dtype;
  scratch_.shape = n.shape;
  scratch_.attrs = n.attrs;
  scratch_.loc = n.loc;
  scratch_.in = n.in;
  for (NodeId& i : scratch_.in) {
    if (map_[size_t(i)] < 0) throw Error("rewriter: %" + std::to_string(i) + " used before it was emitted");
    i = map_[size_t(i)];
  }
  return scratch_;
}

void Rewriter::at_location_of(NodeId old) { out().current_loc = src_.at(old).loc; }

// Appends a node whose operands are already mapped. It keeps the source node's type instead of
// running its shape rule again: passes only substitute operands of the same type (the verifier
// checks the pipeline's result), and the rules were a large share of compile time.
NodeId Rewriter::emit(Node n) {
  const bool param = n.op == Op::parameter;
  Graph& out = this->out();
  NodeId id;
  if (in_place_) {
    if (size_t(written_) == out.nodes.size()) throw Error("rewriter: an in-place rewrite got ahead of its input");
    id = written_++;
    out.nodes[size_t(id)] = std::move(n);
  } else {
    out.nodes.push_back(std::move(n));
    id = NodeId(out.nodes.size() - 1);
  }
  if (param) out.params.push_back(id);
  return id;
}

void Rewriter::map_operands(Node& n) const {
  for (NodeId& i : n.in) {
    if (map_[size_t(i)] < 0) throw Error("rewriter: %" + std::to_string(i) + " used before it was emitted");
    i = map_[size_t(i)];
  }
}

// A node that stays where it is only has its operands renamed: nothing moves.
NodeId Rewriter::take_in_place(NodeId old) {
  if (old < written_) throw Error("rewriter: %" + std::to_string(old) + " was overwritten before it was taken");
  if (old != written_) {
    Node n = take_from(in_place_->nodes[size_t(old)]);
    map_operands(n);
    in_place_->current_loc = n.loc;
    return map_[size_t(old)] = emit(std::move(n));
  }
  Node& n = in_place_->nodes[size_t(old)];
  map_operands(n);
  in_place_->current_loc = n.loc;
  if (n.op == Op::parameter) in_place_->params.push_back(old);
  ++written_;
  return map_[size_t(old)] = old;
}

NodeId Rewriter::copy(NodeId old) {
  if (in_place_) return take_in_place(old);
  const Node& n = src_.at(old);
  at_location_of(old);
  return map_[size_t(old)] = emit(Node{n.op, n.dtype, n.shape, mapped_inputs(old), n.attrs, n.loc});
}

NodeId Rewriter::take(NodeId old) {
  if (in_place_) return take_in_place(old);
  if (!movable_) return copy(old);
  Node n = take_from(movable_->nodes[size_t(old)]);
  map_operands(n);
  out_.current_loc = n.loc;
  return map_[size_t(old)] = emit(std::move(n));
}

void Rewriter::keep_prefix(NodeId end) {
  if (in_place_) {
    if (written_ != 0) throw Error("rewriter: keep_prefix after other nodes");
    for (NodeId n = 0; n < end; ++n) map_[size_t(n)] = n;
    for (NodeId p : source_params_)
      if (p < end) in_place_->params.push_back(p);
    written_ = end;
    return;
  }
  if (!out_.nodes.empty()) throw Error("rewriter: keep_prefix after other nodes");
  for (NodeId n = 0; n < end; ++n) {
    if (movable_) emit(take_from(movable_->nodes[size_t(n)]));
    else emit(src_.at(n));
    map_[size_t(n)] = n;
  }
}

void Rewriter::set(NodeId old, NodeId replacement) { map_[size_t(old)] = replacement; }

NodeId Rewriter::replace(NodeId old, Node n) {
  if (in_place_ && old < written_) throw Error("rewriter: %" + std::to_string(old) + " was overwritten before it was replaced");
  out().current_loc = n.loc;
  return map_[size_t(old)] = emit(std::move(n));
}

Graph Rewriter::finish() {
  for (NodeId p : in_place_ ? source_params_ : src_.params)
    if (map_[size_t(p)] < 0) throw Error("rewriter: a parameter was dropped");
  if (in_place_) {
    // The memory of the nodes that dropped out goes back for what follows (a deep model's
    // fusion leaves half of them, and the executable keeps its graph).
    in_place_->nodes.truncate(size_t(written_));
    in_place_->nodes.release_unused();
    for (NodeId& o : in_place_->outputs) o = map_[size_t(o)];
    in_place_->current_loc = -1;
    return std::move(*in_place_);
  }
  out_.outputs.clear();
  for (NodeId o : src_.outputs) out_.outputs.push_back(map_[size_t(o)]);
  out_.current_loc = -1;
  return std::move(out_);
}

}  // namespace tpu
