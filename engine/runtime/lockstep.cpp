#include "runtime/lockstep.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/onednn_conv.h"
#include "ops/conv.h"
#include "ops/op_table.h"
#include "ops/reduce.h"

namespace tpu {

namespace {

bool is_candidate(const Node& n) { return n.op == Op::fusion && num_elements(n.shape) >= kLockStepMinElements; }

// The operand shape a reduce or reduce_fusion reduces.
const Shape& reduced_operand(const Graph& g, const Node& n) {
  if (n.op == Op::reduce) return g.at(n.in[0]).shape;
  const Graph& body = *n.attrs.body();
  return body.at(body.outputs[0]).shape;
}

// A reduction that may run tile by tile beside others (ops/reduce.h reduce_together): f32, of a
// tiled form, over an operand large enough to gain.
bool is_tiled_reduction(const Graph& g, const Node& n) {
  if ((n.op != Op::reduce && n.op != Op::reduce_fusion) || n.dtype != DType::f32) return false;
  if (n.op == Op::reduce && g.at(n.in[0]).dtype != DType::f32) return false;
  const Shape& s = reduced_operand(g, n);
  return num_elements(s) >= kLockStepMinElements && reduce_tile(s, n.attrs.dims()) > 0;
}

// A conv whose fusion readers may take its result chunk by chunk (ops/fusion.h run_after_conv):
// f32 operands and result, large enough to gain, in chunks of images that do not cut a fusion
// program's chunks (else the run would always go one member after the other, its operands
// kept to its end for nothing).
bool is_conv_producer(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.dtype != DType::f32 || g.at(n.in[0]).dtype != DType::f32 ||
      g.at(n.in[1]).dtype != DType::f32 || num_elements(n.shape) < kLockStepMinElements)
    return false;
  const Shape& y = n.shape;
  return conv_chunk_images(y[0], y[1] * y[2]) * y[1] * y[2] * y[3] % kFusionChunk == 0;
}

// A max pool's gradient whose result's sums may be taken image by image as it is made (ops/fusion.h
// run_after_scatter): f32 operands and result, large enough to gain.
bool is_scatter_producer(const Graph& g, const Node& n) {
  return n.op == Op::select_and_scatter && n.dtype == DType::f32 && g.at(n.in[0]).dtype == DType::f32 &&
         g.at(n.in[1]).dtype == DType::f32 && num_elements(n.shape) >= kLockStepMinElements;
}

// A filter gradient a scatter run may take chunk by chunk (ops/fusion.h run_after_scatter): f32,
// over fixed chunks of images by its shape (ops/conv.h filter_grad_in_image_chunks; the run
// checks the rest), its input not the output gradient itself (the run checks the input before
// the scatter makes that).
bool is_chunked_filter_grad(const Graph& g, const Node& n) {
  return n.op == Op::conv_filter_grad && n.dtype == DType::f32 && g.at(n.in[0]).dtype == DType::f32 &&
         g.at(n.in[1]).dtype == DType::f32 && n.in[0] != n.in[1] && filter_grad_in_image_chunks(n, g.at(n.in[0]).shape);
}

// A pool of a conv run's member, image by image (ops/reduce_window.h): f32 operand and result.
bool is_f32_pool(const Graph& g, const Node& n) {
  return n.op == Op::reduce_window && n.dtype == DType::f32 && g.at(n.in[0]).dtype == DType::f32;
}

// The shape a member's elements run over: a fusion's, conv's or scatter's result, a reduction's
// operand, a filter gradient's output gradient.
const Shape& run_shape(const Graph& g, const Node& n) {
  if (n.op == Op::conv_filter_grad) return g.at(n.in[1]).shape;
  return n.op == Op::fusion || n.op == Op::conv || n.op == Op::select_and_scatter ? n.shape : reduced_operand(g, n);
}

// No broadcast in r's body reads the parameter operand x is passed as (a same-shape broadcast
// would read all of x, not r's range of it).
bool body_reads_in_step(const Node& r, NodeId x) {
  const Graph& body = *r.attrs.body();
  for (size_t i = 0; i < r.in.size(); ++i) {
    if (r.in[i] != x) continue;
    const NodeId param = body.params[i];
    for (const Node& b : body.nodes)
      if (b.op == Op::broadcast && b.in[0] == param) return false;
  }
  return true;
}

}  // namespace

bool reads_in_step(const Graph& g, const Node& r, NodeId x) {
  const bool fusion = is_candidate(r) && r.shape == g.at(x).shape;
  const bool reduction = is_tiled_reduction(g, r) && reduced_operand(g, r) == g.at(x).shape;
  if (!fusion && !reduction) return false;
  return r.op == Op::reduce || body_reads_in_step(r, x);
}

std::vector<NodeId> sink_into_readers(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot) {
  const size_t count = g.nodes.size();
  std::vector<int32_t> pos(count, -1);
  for (size_t k = 0; k < order.size(); ++k) pos[size_t(order[k])] = int32_t(k);
  // The first scheduled reader of each sinkable fusion (-1: it stays); a reader outside the
  // schedule (a graph output only) leaves it alone.
  std::vector<NodeId> first_reader(count, -1);
  std::vector<bool> stays(count, false);
  for (NodeId r : order)
    for (NodeId i : g.at(r).in) {
      if (stays[size_t(i)] || pos[size_t(i)] < 0 || !is_candidate(g.at(i))) continue;
      if (slot[size_t(r)] != slot[size_t(i)] || !reads_in_step(g, g.at(r), i)) {
        stays[size_t(i)] = true;
        continue;
      }
      if (first_reader[size_t(i)] < 0) first_reader[size_t(i)] = r;
    }
  // Deferred fusions wait on their first reader, in their own order; pulling one in pulls in
  // those waiting on it first. A reader deferred in turn may land past the fusion's other
  // readers (a LayerNorm gradient's fusion read by a fusion deferred to a later run and by a
  // sum in between, GPT-2's): then the fusion stays where it was, and the order is made again.
  std::vector<NodeId> out;
  for (bool moved_past_a_reader = true; moved_past_a_reader;) {
    std::vector<std::vector<NodeId>> waiting(count);
    for (NodeId n : order)
      if (!stays[size_t(n)] && first_reader[size_t(n)] >= 0) waiting[size_t(first_reader[size_t(n)])].push_back(n);
    out.clear();
    out.reserve(order.size());
    auto emit = [&](auto& self, NodeId n) -> void {
      for (NodeId w : waiting[size_t(n)]) self(self, w);
      out.push_back(n);
    };
    for (NodeId n : order)
      if (stays[size_t(n)] || first_reader[size_t(n)] < 0) emit(emit, n);
    for (size_t k = 0; k < out.size(); ++k) pos[size_t(out[k])] = int32_t(k);
    moved_past_a_reader = false;
    // What stayed in this order: a fusion may land past several readers (or one reading it
    // twice), and is marked at the first.
    const std::vector<bool> stayed = stays;
    for (NodeId r : out)
      for (NodeId i : g.at(r).in) {
        if (pos[size_t(i)] <= pos[size_t(r)]) continue;
        // Only a deferred fusion moves later; anything else out of order came in so.
        if (stayed[size_t(i)] || first_reader[size_t(i)] < 0)
          throw std::logic_error("lock-step schedule: %" + std::to_string(r) + " was ordered before its operand %" +
                                 std::to_string(i));
        stays[size_t(i)] = moved_past_a_reader = true;
      }
  }
  return out;
}

std::vector<NodeId> pull_filter_grads(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot) {
  std::vector<int32_t> pos(g.nodes.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) pos[size_t(order[k])] = int32_t(k);
  // Per scatter, the end of the reductions right after it (where its filter gradient would go).
  std::vector<int32_t> end_of(g.nodes.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    const Node& n = g.at(order[k]);
    if (!is_scatter_producer(g, n)) continue;
    size_t e = k + 1;
    while (e < order.size() && slot[size_t(order[e])] == slot[size_t(order[k])] && is_tiled_reduction(g, g.at(order[e])) &&
           reduced_operand(g, g.at(order[e])) == n.shape)
      ++e;
    if (e > k + 1) end_of[size_t(order[k])] = int32_t(e);
  }
  std::vector<NodeId> pulled(g.nodes.size(), -1);  // per scatter, the filter gradient moved after it
  std::vector<bool> moved(g.nodes.size(), false);
  for (NodeId f : order) {
    const Node& n = g.at(f);
    if (n.op != Op::conv_filter_grad || !is_chunked_filter_grad(g, n)) continue;
    const NodeId s = n.in[1];
    const int32_t end = end_of[size_t(s)];
    if (end < 0 || pulled[size_t(s)] >= 0 || slot[size_t(f)] != slot[size_t(s)] || pos[size_t(f)] < end ||
        pos[size_t(n.in[0])] >= end)
      continue;
    pulled[size_t(s)] = f;
    moved[size_t(f)] = true;
  }
  std::vector<NodeId> out;
  out.reserve(order.size());
  std::vector<NodeId> due(order.size() + 1, -1);  // due[k]: a filter gradient to emit before order[k]
  for (NodeId s = 0; s < NodeId(g.nodes.size()); ++s)
    if (pulled[size_t(s)] >= 0) due[size_t(end_of[size_t(s)])] = pulled[size_t(s)];
  for (size_t k = 0; k <= order.size(); ++k) {
    if (due[k] >= 0) out.push_back(due[k]);
    if (k < order.size() && !moved[size_t(order[k])]) out.push_back(order[k]);
  }
  return out;
}

// A run is fusions of one shape, or at most one fusion followed by tiled reductions over the
// same dims of operands of its shape (ops/fusion.h run_with_reductions), or a conv followed by
// fusions of its result's shape and pools of those (run_after_conv), or a max pool's gradient
// followed by such reductions and at most one filter gradient of its result (run_after_scatter).
std::vector<int32_t> lockstep_runs(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot) {
  std::vector<int32_t> runs(order.size(), 0);
  std::vector<bool> in_run(g.nodes.size(), false);
  size_t start = 0;
  int32_t fusions = 0;
  bool after_conv = false;                 // the run starts with a conv
  bool after_scatter = false;              // the run starts with a select_and_scatter
  const Node* reduction_of_run = nullptr;  // the run's first reduction: the others reduce its dims
  auto close = [&](size_t end) {
    if (end - start > 1) runs[start] = int32_t(end - start);
    for (size_t k = start; k < end; ++k) in_run[size_t(order[k])] = false;
    start = end;
    fusions = 0;
    after_conv = false;
    after_scatter = false;
    reduction_of_run = nullptr;
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const Node& n = g.at(order[k]);
    const bool conv = is_conv_producer(g, n), scatter = is_scatter_producer(g, n);
    const bool fusion = is_candidate(n), reduction = !fusion && is_tiled_reduction(g, n);
    const bool pool = after_conv && is_f32_pool(g, n) && in_run[size_t(n.in[0])];
    const bool graded = after_scatter && reduction_of_run && n.op == Op::conv_filter_grad && n.in[1] == order[start] &&
                        is_chunked_filter_grad(g, n);
    bool joins = k > start && (fusion || reduction || pool || graded) && slot[size_t(order[k])] == slot[size_t(order[start])] &&
                 (pool ? g.at(n.in[0]).shape : run_shape(g, n)) == run_shape(g, g.at(order[start]));
    if (fusion) joins = joins && !reduction_of_run && !after_scatter;
    if (reduction) joins = joins && !after_conv && fusions <= 1 &&
                           (!reduction_of_run || reduction_of_run->attrs.dims() == n.attrs.dims());
    for (NodeId i : n.in)
      if (joins && !pool && !graded && in_run[size_t(i)] && !reads_in_step(g, n, i)) joins = false;
    if (!joins) close(k);
    if (joins && graded) {  // it ends the run
      close(k + 1);
      continue;
    }
    if (joins && pool) {  // it reads its operand's chunk, image by image
      in_run[size_t(order[k])] = true;
      continue;
    }
    if (conv || scatter) {  // these only start a run
      in_run[size_t(order[k])] = true;
      after_conv = conv;
      after_scatter = scatter;
      continue;
    }
    if (!fusion && !reduction) {
      close(k + 1);
      continue;
    }
    in_run[size_t(order[k])] = true;
    fusions += fusion;
    if (reduction && !reduction_of_run) reduction_of_run = &n;
  }
  close(order.size());
  return runs;
}

bool lockstep_safe(const Graph& g, std::span<const NodeId> members, const std::function<BufferRange(NodeId)>& where) {
  auto overlap = [](const BufferRange& a, const BufferRange& b) {
    return a.space == b.space && a.begin < b.end && b.begin < a.end;
  };
  auto same = [](const BufferRange& a, const BufferRange& b) {
    return a.space == b.space && a.begin == b.begin && a.end == b.end;
  };
  for (size_t w = 0; w < members.size(); ++w) {
    const BufferRange out = where(members[w]);
    for (size_t m = 0; m < members.size(); ++m) {
      const Node& node = g.at(members[m]);
      // A later member may write over an earlier one's result that it reads in step (and is
      // its last reader: the memory plan gives it that storage only then).
      const Node& late = g.at(members[std::max(m, w)]);
      const NodeId early = members[std::min(m, w)];
      const bool over = same(out, where(members[m])) && std::find(late.in.begin(), late.in.end(), early) != late.in.end() &&
                        reads_in_step(g, late, early);
      if (m != w && overlap(out, where(members[m])) && !over) return false;
      for (NodeId i : node.in) {
        const BufferRange in = where(i);
        // A conv run's pool reads a member's result whole images at a time, after the
        // members before it made them and before those after it write over them.
        const bool pooled = node.op == Op::reduce_window && std::find(members.begin(), members.end(), i) != members.end();
        // A scatter run's scatter writes over its pooled input image by image, each after
        // reading it (the memory plan gives it that storage only where its kernel does so).
        const bool scattered = node.op == Op::select_and_scatter && i == node.in[0] && w == m;
        // Its filter gradient reads the scatter's images after they are made.
        const bool graded = node.op == Op::conv_filter_grad && i == members.front();
        if (overlap(out, in) && !(same(out, in) && (pooled || scattered || graded || reads_in_step(g, node, i))))
          return false;
      }
    }
  }
  return true;
}

}  // namespace tpu
