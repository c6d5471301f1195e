// The one shape rule (core/shape.h): no negative dimension, fewer than 2^40 elements, and the
// dimensions other than 0 multiplying to less than 2^40; overflow-safe at every boundary, and
// enforced wherever a shape is born (tensors, graph nodes).
#include <doctest.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <string>

#include "core/bytes.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "runtime/executable.h"

using tpu::DType;
using tpu::kMaxElements;
using tpu::Shape;
using tpu::shape_fault;

namespace {
const std::string kTooMany = "is too large: a tensor has fewer than 2^40 elements";
const std::string kTooManyEmpty = "is too large: its dimensions other than 0 multiply to 2^40 or more";
}  // namespace

TEST_CASE("shape rule: valid shapes up to one element short of 2^40") {
  for (const Shape& s : {Shape{}, Shape{0}, Shape{1}, Shape{kMaxElements - 1}, Shape{1 << 20, (1 << 20) - 1},
                         Shape{0, kMaxElements - 1}, Shape{0, 0, 0}, Shape{2, 0, (kMaxElements - 1) / 2},
                         Shape{3, (kMaxElements - 1) / 3}})
    CHECK_MESSAGE(shape_fault(s).empty(), tpu::shape_str(s));
}

TEST_CASE("shape rule: 2^40 elements or more, and products that overflow int64") {
  const int64_t big = INT64_MAX;
  for (const Shape& s : {Shape{kMaxElements}, Shape{1 << 20, 1 << 20}, Shape{big, 2}, Shape{2, big},
                         Shape{int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32}, Shape{big, big, big},
                         Shape{3, (kMaxElements - 1) / 3 + 1}, Shape{1, 1, 1, 1, 1, kMaxElements}})
    CHECK_MESSAGE(shape_fault(s) == kTooMany, tpu::shape_str(s));
  // Empty tensors too: their strides multiply the other dims.
  for (const Shape& s : {Shape{0, kMaxElements}, Shape{int64_t(1) << 39, 0, 2}, Shape{big, big, 0}})
    CHECK_MESSAGE(shape_fault(s) == kTooManyEmpty, tpu::shape_str(s));
}

TEST_CASE("shape rule: negative dimensions, whatever else the shape holds") {
  for (const Shape& s : {Shape{-1}, Shape{2, -3}, Shape{INT64_MIN}, Shape{INT64_MAX, -1}, Shape{0, -1}})
    CHECK_MESSAGE(shape_fault(s) == "has a negative dimension", tpu::shape_str(s));
}

TEST_CASE("shape rule: check_shape names the call; sizes of valid shapes cannot overflow") {
  CHECK_THROWS_WITH_AS(tpu::check_shape(Shape{INT64_MAX, 2}, "zeros"),
                       ("zeros: shape [9223372036854775807,2] " + kTooMany).c_str(), tpu::Error);
  CHECK_NOTHROW(tpu::check_shape(Shape{2, 3}, "zeros"));
  // The largest padded sizes: the two minor dims round up to 8 and 128.
  CHECK(tpu::tpu_padded_elements(Shape{1, kMaxElements - 1}) == 8 * kMaxElements);
  CHECK(tpu::tpu_padded_elements(Shape{kMaxElements - 1, 1}) == kMaxElements * 128);
  CHECK(tpu::tpu_padded_elements(Shape{kMaxElements / 2, 1, 1}) == kMaxElements / 2 * 8 * 128);
  CHECK(tpu::strides_of(Shape{0, 1 << 20, (1 << 20) - 1})[0] == (int64_t(1) << 40) - (1 << 20));
}

TEST_CASE("shape rule: a tensor with a bad shape is an error, never a buffer of the wrong size") {
  CHECK_THROWS_WITH_AS(tpu::Tensor(DType::f32, Shape{INT64_MAX, 2}), ("tensor: shape [9223372036854775807,2] " + kTooMany).c_str(),
                       tpu::Error);
  CHECK_THROWS_WITH_AS(tpu::Tensor(DType::u8, Shape{-4}), "tensor: shape [-4] has a negative dimension", tpu::Error);
  CHECK_THROWS_AS(tpu::Tensor(DType::f32, Shape{int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32}, tpu::Tensor::Uninitialized{}),
                  tpu::Error);
  CHECK(tpu::Tensor(DType::f32, Shape{0, kMaxElements - 1}).size() == 0);
}

TEST_CASE("shape rule: more than the host's memory is an error naming the tensor and its size") {
  // 2^38 f32 elements are 1 TiB: no test machine has it. Refused before the allocator is asked
  // (one that overcommits would hand out the address space, and filling it would be killed).
  CHECK_THROWS_WITH_AS(tpu::Tensor(DType::f32, Shape{int64_t(1) << 38}),
                       "out of host memory: a f32[274877906944] tensor needs 1.00 TiB", tpu::Error);
}

TEST_CASE("shape rule: graph builders refuse results past the rule, without overflow") {
  tpu::Graph g;
  const int64_t half = int64_t(1) << 20;
  tpu::NodeId x = g.parameter(DType::f32, {half, 1});
  tpu::NodeId y = g.parameter(DType::f32, {1, half});
  CHECK_THROWS_WITH_AS(g.broadcast(g.parameter(DType::f32, {half}), {half, half}, {0}), doctest::Contains(kTooMany.c_str()), tpu::Error);
  CHECK_THROWS_WITH_AS(g.dot(x, y), doctest::Contains(kTooMany.c_str()), tpu::Error);
  CHECK_THROWS_AS(g.pad(x, {INT64_MAX, 0}, {INT64_MAX, 0}, 0), tpu::Error);
  CHECK_THROWS_AS(g.parameter(DType::f32, {INT64_MAX, INT64_MAX}), tpu::Error);
  CHECK_THROWS_AS(g.iota(DType::i32, {half, half}, 0), tpu::Error);
  CHECK_THROWS_AS(g.reshape(x, {INT64_MAX, 2}), tpu::Error);
  // Many operands whose sizes add past 2^40 (and, unchecked, past int64).
  tpu::NodeId huge = g.parameter(DType::u8, {kMaxElements - 1});
  CHECK_THROWS_WITH_AS(g.concat({huge, huge, huge}, 0), doctest::Contains(kTooMany.c_str()), tpu::Error);
  tpu::NodeId idx = g.parameter(DType::i32, {half, half - 1});
  tpu::NodeId rows = g.parameter(DType::f32, {4, 2});
  CHECK_THROWS_WITH_AS(g.gather(rows, idx), doctest::Contains("gather: result shape"), tpu::Error);
}

namespace {
// Compiles g (outputs set) and runs it on zero-filled arguments.
std::vector<tpu::Tensor> run_on_zeros(tpu::Graph g) {
  std::vector<tpu::Tensor> args;
  for (tpu::NodeId p : g.params) args.emplace_back(g.at(p).dtype, g.at(p).shape);
  return tpu::Executable::compile(std::move(g)).run(args);
}
}  // namespace

// Found by fuzz_shapes: kernels that divided by a dimension of 0 (a crash on x86).
TEST_CASE("shape rule: empty tensors run through gather, argmax and fused broadcasts") {
  {
    tpu::Graph g;
    g.outputs = {g.gather(g.parameter(DType::f32, {0, 3}), g.parameter(DType::i32, {0}))};
    CHECK(run_on_zeros(std::move(g))[0].shape() == Shape{0, 3});
  }
  {
    tpu::Graph g;
    g.outputs = {g.argmax(g.parameter(DType::f32, {2, 0}), 0)};
    CHECK(run_on_zeros(std::move(g))[0].shape() == Shape{0});
  }
  {
    tpu::Graph g;
    CHECK_THROWS_WITH_AS(g.argmax(g.parameter(DType::f32, {0, 2}), 0), "argmax: axis 0 of f32[0,2] is empty: it has no maximum",
                         tpu::Error);
  }
  {
    tpu::Graph g;
    tpu::NodeId b = g.broadcast(g.parameter(DType::f32, {0}), {3, 0}, {1});
    g.outputs = {g.binary(tpu::Op::add, g.unary(tpu::Op::exp, b), g.parameter(DType::f32, {3, 0}))};
    CHECK(run_on_zeros(std::move(g))[0].shape() == Shape{3, 0});
  }
}

TEST_CASE("integer elements from doubles saturate (-inf is the identity of an empty max)") {
  tpu::Tensor u(DType::u8, {3}), i(DType::i32, {3});
  u.set(0, -HUGE_VAL), u.set(1, 300), u.set(2, NAN);
  i.set(0, 1e10), i.set(1, -1e10), i.set(2, -7.9);
  CHECK(u.get(0) == 0);
  CHECK(u.get(1) == 255);
  CHECK(u.get(2) == 0);
  CHECK(i.get(0) == INT32_MAX);
  CHECK(i.get(1) == INT32_MIN);
  CHECK(i.get(2) == -7);
}

// Found by fuzz_shapes: i32 arithmetic that overflows wraps instead of being undefined
// (INT32_MIN / -1 was a crash on x86).
TEST_CASE("i32 elementwise arithmetic wraps") {
  tpu::Tensor a(DType::i32, {3}), b(DType::i32, {3});
  a.set(0, INT32_MIN), a.set(1, INT32_MAX), a.set(2, INT32_MIN);
  b.set(0, -1), b.set(1, 1), b.set(2, 2);
  for (bool reference : {true, false}) {
    tpu::Graph g;
    tpu::NodeId x = g.constant(a), y = g.constant(b);
    g.outputs = {g.unary(tpu::Op::neg, x), g.binary(tpu::Op::div, x, y), g.binary(tpu::Op::add, x, y),
                 g.binary(tpu::Op::mul, x, y), g.unary(tpu::Op::abs, x)};
    tpu::CompileOptions o;
    o.reference_kernels = reference;
    std::vector<tpu::Tensor> r = tpu::Executable::compile(std::move(g), o).run({});
    CHECK(r[0].get(0) == INT32_MIN);  // -INT32_MIN
    CHECK(r[1].get(0) == INT32_MIN);  // INT32_MIN / -1
    CHECK(r[2].get(1) == INT32_MIN);  // INT32_MAX + 1
    CHECK(r[3].get(2) == 0);          // INT32_MIN * 2
    CHECK(r[4].get(2) == INT32_MIN);  // |INT32_MIN|
  }
  tpu::Graph g;
  tpu::Tensor idx(DType::i32, {2});
  g.outputs = {g.scatter_add(g.constant(b.reshaped({3, 1})), g.constant(idx), g.constant(a.rows(0, 2).reshaped({2, 1})))};
  CHECK(run_on_zeros(std::move(g))[0].get(0) == -2);  // -1 + INT32_MIN + INT32_MAX, wrapping twice
}

// Found by fuzz_shapes: an empty result runs no kernel (this window kernel walked 2^32 output
// positions of 0 channels, for seconds).
TEST_CASE("shape rule: an empty result costs nothing to run") {
  tpu::Graph g;
  g.outputs = {g.reduce_window(g.parameter(DType::f32, {1, 1 << 16, 1 << 16, 0}), tpu::WindowKind::max, tpu::Window2D{})};
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_on_zeros(std::move(g))[0].shape() == Shape{1, 1 << 16, 1 << 16, 0});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("format_bytes: the unit that reads best, TiB included") {
  CHECK(tpu::format_bytes(512) == "512 B");
  CHECK(tpu::format_bytes(1536) == "1.5 KiB");
  CHECK(tpu::format_bytes(12.0 * (1 << 20)) == "12.0 MiB");
  CHECK(tpu::format_bytes(9.21 * (1 << 30)) == "9.21 GiB");
  CHECK(tpu::format_bytes(double(int64_t(1) << 40)) == "1.00 TiB");
}
