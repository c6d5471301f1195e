// The fusion row: a body graph of elementwise ops (plus broadcasts and scalar constants)
// evaluated in blocks of kBlock elements. Each op in a block runs the same kernel as it
// would unfused, on 64-byte aligned block-sized pieces, so results are bitwise the same.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "autodiff/gradients.h"
#include "ops/conv.h"
#include "ops/fusion.h"
#include "ops/fusion_program.h"
#include "ops/kernel_util.h"
#include "ops/reduce.h"
#include "ops/reduce_window.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

constexpr int64_t kBlock = 4096;        // elements per block (a multiple of every SIMD width)
constexpr int64_t kBlocksPerTask = 8;   // blocks per parallel task

const Graph& body_of(const Node& n) { return *n.attrs.body(); }

std::string shape_fusion(const Graph& g, Node& n) {
  if (!n.attrs.body() || n.attrs.body()->outputs.size() != 1) return "fusion without a body";
  const Graph& body = body_of(n);
  if (body.params.size() != n.in.size()) return "fusion: body takes " + std::to_string(body.params.size()) + " inputs, given " + std::to_string(n.in.size());
  for (size_t i = 0; i < n.in.size(); ++i) {
    const Node& p = body.at(body.params[i]);
    const Node& x = g.at(n.in[i]);
    if (p.dtype != x.dtype || p.shape != x.shape) return "fusion: input " + std::to_string(i) + " is " + type_of(g, n.in[i]) + ", body expects " + type_str(p.dtype, p.shape);
  }
  const Node& out = body.at(body.outputs[0]);
  n.dtype = out.dtype;
  n.shape = out.shape;
  return "";
}

// Whole-tensor evaluation with every op's reference kernel.
void ref_fusion(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Graph& body = body_of(n);
  std::vector<Tensor> values(body.nodes.size());
  for (size_t i = 0; i < body.params.size(); ++i) values[size_t(body.params[i])] = *in[i];
  std::vector<const Tensor*> args;
  for (NodeId id = 0; id < NodeId(body.nodes.size()); ++id) {
    const Node& node = body.at(id);
    if (node.op == Op::parameter) continue;
    values[size_t(id)] = Tensor(node.dtype, node.shape);
    args.clear();
    for (NodeId i : node.in) args.push_back(&values[size_t(i)]);
    op_info(node.op).reference(node, args, values[size_t(id)]);
  }
  const Tensor& r = values[size_t(body.outputs[0])];
  std::memcpy(out.raw(), r.raw(), out.bytes());
}

// Fills a block of a broadcast's output: elements [start, start + len) of the full shape.
template <class T>
void broadcast_block_typed(const Node& b, const Tensor& src, int64_t start, int64_t len, T* dst) {
  const T* s = src.data<T>();
  const int64_t src_n = src.size();
  if (len == 0 || src_n == 0) return;  // an empty output (a 0 in the shape): nothing to divide by
  if (src_n == 1) {
    std::fill_n(dst, len, s[0]);
    return;
  }
  const Shape& out = b.shape;
  const auto& dims = b.attrs.dims();
  const size_t r = out.size(), k = dims.size();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < k; ++i) {
    trailing = trailing && dims[i] == int64_t(r - k + i);
    leading = leading && dims[i] == int64_t(i);
  }
  if (trailing) {  // src repeats every src_n elements (a bias)
    for (int64_t j = 0, at = start % src_n; j < len;) {
      int64_t run = std::min(len - j, src_n - at);
      std::copy_n(s + at, run, dst + j);
      j += run;
      at = 0;
    }
    return;
  }
  if (leading) {  // each src element spans `inner` consecutive elements
    const int64_t inner = num_elements(out) / src_n;
    for (int64_t j = 0; j < len;) {
      int64_t idx = start + j, run = std::min(len - j, inner - idx % inner);
      std::fill_n(dst + j, run, s[idx / inner]);
      j += run;
    }
    return;
  }
  auto ostr = strides_of(out);
  auto sstr = strides_of(src.shape());
  std::vector<int64_t> map(r, 0);  // out dim -> src stride
  for (size_t i = 0; i < k; ++i) map[size_t(dims[i])] = sstr[i];
  for (int64_t j = 0; j < len; ++j) {
    int64_t idx = start + j, at = 0;
    for (size_t d = 0; d < r; ++d) {
      at += (idx / ostr[d]) * map[d];
      idx %= ostr[d];
    }
    dst[j] = s[at];
  }
}

void broadcast_block(const Node& b, const Tensor& src, int64_t start, int64_t len, std::byte* dst) {
  dispatch(b.dtype, [&]<class T>() { broadcast_block_typed<T>(b, src, start, len, reinterpret_cast<T*>(dst)); });
}

// What evaluating blocks needs besides the inputs, kept per thread and reused across calls so
// a step allocates nothing here: one block-sized slot per body node, the block views (shape
// {len}, rebound to the next block's memory) and the operand list.
// The slots are host scratch of the kernel, not values of the graph: plain aligned memory, so
// they do not count as the simulated device memory that Tensor buffers are.
struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};
struct BlockState {
  std::unique_ptr<std::byte[], FreeAligned> slots;  // body node i's block at i * kSlotBytes
  size_t slot_bytes = 0;
  std::vector<Tensor> views;  // per body node
  std::vector<int32_t> param_index;
  std::vector<const Tensor*> args;
};
constexpr int64_t kSlotBytes = kBlock * 8;  // room for the widest dtype; a multiple of 64

BlockState& block_state(const Graph& body, int64_t len) {
  thread_local BlockState st;
  const size_t nodes = body.nodes.size();
  if (st.slot_bytes < nodes * size_t(kSlotBytes)) {
    st.views.clear();  // they point into the old slots
    st.slots.reset(static_cast<std::byte*>(std::aligned_alloc(64, nodes * size_t(kSlotBytes))));
    if (!st.slots) throw std::bad_alloc();
    st.slot_bytes = nodes * size_t(kSlotBytes);
  }
  st.views.resize(nodes);
  for (size_t i = 0; i < nodes; ++i) {
    std::byte* slot = st.slots.get() + i * kSlotBytes;
    Tensor& v = st.views[i];
    if (v.dtype() == body.nodes[i].dtype && v.rank() == 1 && v.size() == len) v.rebind(slot);
    else v = Tensor::borrow(body.nodes[i].dtype, {len}, slot);
  }
  st.param_index.assign(nodes, -1);
  for (size_t i = 0; i < body.params.size(); ++i) st.param_index[size_t(body.params[i])] = int32_t(i);
  return st;
}

// Evaluates elements [begin, end) of the body's result into dst (where element begin goes), a
// block of kBlock elements at a time. Only the range's last block may be shorter, so the views
// get a new shape at most once.
void run_range(const Node& n, std::span<const Tensor* const> in, int64_t begin, int64_t end, std::byte* dst) {
  if (begin >= end) return;
  const Graph& body = body_of(n);
  const NodeId root = body.outputs[0];
  const Shape& shape = body.at(root).shape;
  BlockState& st = block_state(body, std::min(kBlock, end - begin));
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t len = std::min(kBlock, end - start);
    if (st.views.front().size() != len) block_state(body, len);
    for (NodeId id = 0; id < NodeId(body.nodes.size()); ++id) {
      const Node& node = body.at(id);
      const int64_t es = int64_t(size_of(node.dtype));
      Tensor& view = st.views[size_t(id)];
      if (node.shape != shape && (node.op == Op::constant || node.op == Op::parameter)) continue;
      if (node.op == Op::constant) {  // a scalar group's constant operand
        view.rebind(const_cast<std::byte*>(node.attrs.literal()->raw()));
        continue;
      }
      if (node.op == Op::parameter) {
        view.rebind(const_cast<std::byte*>(in[size_t(st.param_index[size_t(id)])]->raw()) + start * es);
        continue;
      }
      if (id == root) view.rebind(dst + (start - begin) * es);
      if (node.op == Op::broadcast) {
        const Node& src = body.at(node.in[0]);
        const Tensor& s = src.op == Op::constant ? *src.attrs.literal() : *in[size_t(st.param_index[size_t(node.in[0])])];
        // A scalar's block holds the same values for every block: fill it once per call.
        if (s.size() != 1 || start == begin || id == root) broadcast_block(node, s, start, len, view.raw());
        continue;
      }
      st.args.clear();
      for (NodeId i : node.in) st.args.push_back(&st.views[size_t(i)]);
      kernel_for(node.op)(node, st.args, view);
    }
  }
}

// Elements [begin, end) of a fusion call's result: by its body's program (p), which makes any
// chunk-aligned range as it makes the whole, or in blocks from begin (those of the whole where
// begin is a multiple of kBlock).
void make_range(const LockstepCall& c, const FusionProgram* p, int64_t begin, int64_t end) {
  if (p) return p->run(c.in, *c.out, begin, end);
  run_range(*c.node, c.in, begin, end, c.out->raw() + begin * int64_t(size_of(c.out->dtype())));
}

void fast_fusion(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const LockstepCall call{&n, in, &out};
  run_fusions_in_lockstep({&call, 1});
}

Cost cost_fusion(const Graph& g, const Node& n) {
  Cost c = movement_cost(g, n);  // reads its inputs and writes its output once
  const Graph& body = body_of(n);
  for (const Node& b : body.nodes)
    if (b.op != Op::parameter && b.op != Op::constant) c.flops += op_info(b.op).cost(body, b).flops;
  return c;
}

// The gradient of a fused computation whose result is `y` of `local` (a copy of the body, with
// whatever follows the body's result): `local` is differentiated on its own, its nodes then
// copied in with the fusion's operands and the output gradient as its arguments. The pass
// fuses only after autodiff, but a template (an optimizer's update applied to each parameter,
// core.apply_template) brings fusion nodes into traces that may be differentiated.
void grad_of_body(GradContext& c, Graph local, NodeId y) {
  const Node& n = c.n();
  const NodeId seed = local.parameter(n.dtype, n.shape);
  std::vector<NodeId> xs;  // the body's parameters whose operands want a gradient
  for (size_t i = 0; i < n.in.size(); ++i)
    if (c.needs(i)) xs.push_back(local.params[i]);
  local.outputs = gradients(local, y, xs, seed);
  Operands args = n.in;
  args.push_back(c.out_grad);
  const std::vector<NodeId> grads = c.g.inline_call(local, args);
  for (size_t i = 0, k = 0; i < n.in.size(); ++i)
    if (c.needs(i)) c.give(i, grads[k++]);  // an operand read twice: the driver adds both
}

void grad_fusion(GradContext& c) {
  const Graph& body = body_of(c.n());
  grad_of_body(c, body, body.outputs[0]);
}

// ---- reduce_fusion: the body's result reduced over the axes attrs.dims() (kind attrs.axis) ----

// The reduce the body's result goes through, as a node of its own.
Node reduce_of(const Node& n) {
  Node r{Op::reduce, n.dtype, n.shape, {}, {}, n.loc};
  r.attrs.set_dims(n.attrs.dims());
  r.attrs.axis = n.attrs.axis;
  return r;
}

const Shape& reduced_shape(const Node& n) { return body_of(n).at(body_of(n).outputs[0]).shape; }

std::string shape_reduce_fusion(const Graph& g, Node& n) {
  if (std::string problem = shape_fusion(g, n); !problem.empty()) return "reduce_" + problem;
  if (n.dtype != DType::f32) return "reduce_fusion: the body's result is " + type_str(n.dtype, n.shape) + ", not f32";
  if (!valid_axes(n.attrs.dims(), n.shape.size()) || n.attrs.axis < 0 || n.attrs.axis > 2)
    return "reduce_fusion: bad axes " + shape_str(n.attrs.dims()) + " for the body's " + type_str(n.dtype, n.shape);
  Shape kept;
  const Dims& axes = n.attrs.dims();
  for (size_t i = 0; i < n.shape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), int64_t(i)) == axes.end()) kept.push_back(n.shape[i]);
  n.shape = kept;
  return "";
}

// The body's whole result with the reference kernels, then the reference reduce.
void ref_reduce_fusion(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  Tensor operand(DType::f32, reduced_shape(n));
  ref_fusion(n, in, operand);
  const Tensor* args[] = {&operand};
  op_info(Op::reduce).reference(reduce_of(n), std::span<const Tensor* const>(args), out);
}

// Elements [begin, end) of the f32 result of a body without a program, made in the blocks
// fast_fusion makes (an element's bits may depend on where its block starts and ends: the
// vector kernels' tails); a block the range cuts is made whole aside and its part copied.
void produce_blocks(const Node& n, std::span<const Tensor* const> in, int64_t begin, int64_t end, float* dst) {
  thread_local std::vector<float> block;
  const int64_t total = num_elements(reduced_shape(n));
  for (int64_t start = begin / kBlock * kBlock; start < end; start += kBlock) {
    const int64_t stop = std::min(total, start + kBlock), lo = std::max(begin, start), hi = std::min(end, stop);
    if (lo == start && hi == stop) {
      run_range(n, in, start, stop, reinterpret_cast<std::byte*>(dst + (start - begin)));
      continue;
    }
    block.resize(size_t(kBlock));
    run_range(n, in, start, stop, reinterpret_cast<std::byte*>(block.data()));
    std::copy(block.data() + (lo - start), block.data() + (hi - start), dst + (lo - begin));
  }
}

// What makes tiles of a reduce_fusion's operand: its body's program (p), or the body in blocks.
TileProducer tile_producer(const Node& n, const FusionProgram* p, std::span<const Tensor* const> in) {
  return [p, &n, in](int64_t begin, int64_t end, float* dst) {
    if (p) p->run_into(in, dst, begin, end);
    else produce_blocks(n, in, begin, end, dst);
  };
}

// The operand is made a tile at a time for the reduce (ops/reduce.h), by the body's program or
// in blocks; a reduce that does not tile stores the operand and reduces it.
void fast_reduce_fusion(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const TileProducer produce = tile_producer(n, fusion_program(n), in);
  if (reduce_produced(reduced_shape(n), n.attrs.dims(), n.reduce_kind(), kFusionChunk, produce, out.data<float>()))
    return;
  Tensor operand(DType::f32, reduced_shape(n));
  fast_fusion(n, in, operand);
  const Tensor* args[] = {&operand};
  kernel_for(Op::reduce)(reduce_of(n), std::span<const Tensor* const>(args), out);
}

void grad_reduce_fusion(GradContext& c) {
  const Node& n = c.n();
  Graph local = body_of(n);
  const NodeId y = local.reduce(local.outputs[0], n.attrs.dims(), n.reduce_kind());
  grad_of_body(c, std::move(local), y);
}

Cost cost_reduce_fusion(const Graph& g, const Node& n) {
  Cost c = cost_fusion(g, n);
  c.flops += double(num_elements(reduced_shape(n)));
  return c;
}

}  // namespace

void run_fusions_in_lockstep(std::span<const LockstepCall> calls) {
  const int64_t size = calls.front().out->size();
  const int64_t blocks = (size + kBlock - 1) / kBlock;
  const int64_t tasks = (blocks + kBlocksPerTask - 1) / kBlocksPerTask;
  thread_local std::vector<const FusionProgram*> reused;  // no allocation per step
  std::vector<const FusionProgram*>& programs = reused;    // this thread's, in every task
  programs.clear();
  for (const LockstepCall& c : calls) programs.push_back(fusion_program(*c.node));
  parallel_for(tasks, [&](int64_t t) {
    const int64_t first = t * kBlocksPerTask, last = std::min(blocks, (t + 1) * kBlocksPerTask);
    for (size_t k = 0; k < calls.size(); ++k) make_range(calls[k], programs[k], first * kBlock, std::min(size, last * kBlock));
  });
}

namespace {
// Each reduction's TiledReduce: its operand read in place (reduce), or its tile made by its
// body's program or in blocks (reduce_fusion). True when some tile is made in blocks.
bool tiled_members(std::span<const LockstepCall> reductions, std::vector<TiledReduce>& members) {
  bool blocks = false;
  members.clear();
  for (const LockstepCall& c : reductions) {
    const Node& n = *c.node;
    TiledReduce& m = members.emplace_back(TiledReduce{n.reduce_kind(), nullptr, {}, c.out->data<float>()});
    if (n.op == Op::reduce) {
      m.operand = c.in[0]->data<float>();
      continue;
    }
    const FusionProgram* p = fusion_program(n);
    blocks = blocks || !p;
    m.produce = tile_producer(n, p, c.in);
  }
  return blocks;
}

void one_after_another(std::span<const LockstepCall> calls) {
  for (const LockstepCall& c : calls) kernel_for(c.node->op)(*c.node, c.in, *c.out);
}
}  // namespace

void run_with_reductions(std::span<const LockstepCall> calls) {
  const LockstepCall* made = calls.front().node->op == Op::fusion ? &calls.front() : nullptr;
  const auto reductions = calls.subspan(made ? 1 : 0);
  const Node& first = *reductions.front().node;
  const Shape& shape = first.op == Op::reduce ? reductions.front().in[0]->shape() : reduced_shape(first);
  const FusionProgram* program = made ? fusion_program(*made->node) : nullptr;
  thread_local std::vector<TiledReduce> members;  // reused: no allocation per step
  // A program makes any chunk-aligned range exactly; block evaluation only whole blocks. A
  // reduction without a program makes its tile in whole blocks too: one that crossed the tile's
  // end would read the fusion's result where another task is writing it.
  const bool some_in_blocks = tiled_members(reductions, members);
  const bool blocks = made && (!program || some_in_blocks);
  const int64_t tile = reduce_tile(shape, first.attrs.dims()), align = blocks ? kBlock : kFusionChunk;
  if (tile == 0 || tile % align != 0) return one_after_another(calls);
  std::function<void(int64_t, int64_t)> make;
  if (made) make = [made, program](int64_t begin, int64_t end) { make_range(*made, program, begin, end); };
  reduce_together(shape, first.attrs.dims(), members, kFusionChunk, make);
}

void run_after_scatter(std::span<const LockstepCall> calls) {
  const LockstepCall& scatter = calls.front();
  const bool graded = calls.back().node->op == Op::conv_filter_grad;
  const auto reductions = calls.subspan(1, calls.size() - (graded ? 2 : 1));
  const Dims dims = reductions.front().node->attrs.dims();
  thread_local std::vector<TiledReduce> members;  // reused: no allocation per step
  // As in run_with_reductions: a tile that cut a chunk or block would read the scatter's
  // result beyond the images made.
  const int64_t align = tiled_members(reductions, members) ? kBlock : kFusionChunk;
  const Shape& shape = scatter.out->shape();
  const int64_t tile = reduce_tile(shape, dims);
  const LockstepCall& grad = calls.back();
  const ImageChunkedFilterGrad parts = graded ? image_chunked_filter_grad(*grad.node, grad.in) : ImageChunkedFilterGrad{};
  if (tile == 0 || tile % align != 0) return one_after_another(calls);
  auto scatter_images = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) select_and_scatter_image(*scatter.node, scatter.in, *scatter.out, b);
  };
  if (!graded || parts.count == 0) {
    reduce_as_made(shape, dims, members, kFusionChunk, 0, scatter_images);
    if (graded) one_after_another(calls.last(1));
    return;
  }
  // The filter gradient's chunks are the scatter's: each chunk's partial right after its images.
  const int64_t size = grad.out->size();
  thread_local std::vector<float> reused;  // no allocation per step
  reused.resize(size_t(parts.count * size));
  float* partials = reused.data();  // this thread's: the tasks run on others
  reduce_as_made(shape, dims, members, kFusionChunk, parts.images, [&](int64_t b0, int64_t b1) {
    scatter_images(b0, b1);
    parts.part(b0 / parts.images, partials + b0 / parts.images * size);
  });
  parts.sum(partials, parts.count, grad.out->data<float>());
}

void run_after_conv(std::span<const LockstepCall> calls) {
  const LockstepCall& conv = calls.front();
  const auto members = calls.subspan(1);  // fusions, and pools (reduce_window) of members
  thread_local std::vector<const FusionProgram*> reused;  // no allocation per step
  std::vector<const FusionProgram*>& programs = reused;
  programs.clear();
  bool blocks = false;
  for (const LockstepCall& c : members) {
    programs.push_back(c.node->op == Op::fusion ? fusion_program(*c.node) : nullptr);
    blocks = blocks || (c.node->op == Op::fusion && !programs.back());
  }
  // A program makes any chunk-aligned range as it makes the whole; block evaluation, whole blocks.
  const Shape& y = conv.out->shape();
  const int64_t per_image = y[1] * y[2] * y[3], chunk = conv_chunk_images(y[0], y[1] * y[2]) * per_image;
  auto after_chunk = [&](int64_t begin, int64_t end) {
    for (size_t k = 0; k < members.size(); ++k) {
      const LockstepCall& c = members[k];
      if (c.node->op == Op::reduce_window) reduce_window_images(*c.node, c.in, *c.out, begin / per_image, end / per_image);
      else make_range(c, programs[k], begin, end);
    }
  };
  if (chunk % (blocks ? kBlock : kFusionChunk) == 0 && conv_in_chunks(*conv.node, conv.in, *conv.out, after_chunk)) return;
  one_after_another(calls);
}

void run_in_lockstep(std::span<const LockstepCall> calls) {
  if (calls.front().node->op == Op::conv) return run_after_conv(calls);
  if (calls.front().node->op == Op::select_and_scatter) return run_after_scatter(calls);
  const bool reduces = std::any_of(calls.begin(), calls.end(), [](const LockstepCall& c) { return c.node->op != Op::fusion; });
  if (reduces) run_with_reductions(calls);
  else run_fusions_in_lockstep(calls);
}

extern const OpInfo fusion_row = {Op::fusion, shape_fusion, ref_fusion, fast_fusion, grad_fusion, cost_fusion, kInPlace};
extern const OpInfo reduce_fusion_row = {Op::reduce_fusion, shape_reduce_fusion, ref_reduce_fusion, fast_reduce_fusion,
                                         grad_reduce_fusion, cost_reduce_fusion};

}  // namespace tpu
