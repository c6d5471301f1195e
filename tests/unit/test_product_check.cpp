// The check every new oneDNN primitive passes before it is used (kernels/product_check.h):
// right products pass in every layout, wrong ones fail, the kinds of wrong a library can be; and
// the math mode every primitive is made with.
#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/product_check.h"
#ifdef TPU_HAVE_ONEDNN
#include "kernels/onednn_util.h"
#endif

using namespace tpu;

namespace {

struct Product {
  int64_t m, k, w;
  bool ta, tb;
  std::vector<float> a, b, c;
  Operands operands = Operands::any;
  MatrixView av() const { return ta ? MatrixView{a.data(), 1, m} : MatrixView{a.data(), k, 1}; }
  MatrixView bv() const { return tb ? MatrixView{b.data(), 1, k} : MatrixView{b.data(), w, 1}; }
  MatrixView cv() const { return {c.data(), w, 1}; }
  bool passes() const { return product_matches_at_samples(av(), bv(), cv(), m, k, w, operands); }
  // Every entry's sum without its last term (a tail of the inner dimension left out).
  Product without_last_term() const {
    Product p = *this;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < w; ++j) p.c[size_t(i * w + j)] -= av().at(i, k - 1) * bv().at(k - 1, j);
    return p;
  }
};

// C = A B summed in f32, k in order (as a library does), over A and B stored per ta and tb;
// with Operands::probe, values as the probes have them (multiples of 1/128 below 1), at least
// `lowest` / 128.
Product product(int64_t m, int64_t k, int64_t w, bool ta, bool tb, uint32_t seed, Operands operands = Operands::any,
                int lowest = -127) {
  Product p{m, k, w, ta, tb, std::vector<float>(size_t(m * k)), std::vector<float>(size_t(k * w)),
            std::vector<float>(size_t(m * w)), operands};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> grid(lowest, 127);
  auto value = [&] { return operands == Operands::probe ? float(grid(rng)) / 128.0f : u(rng); };
  for (float& x : p.a) x = value();
  for (float& x : p.b) x = value();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < w; ++j) {
      float sum = 0;
      for (int64_t q = 0; q < k; ++q) sum += p.av().at(i, q) * p.bv().at(q, j);
      p.c[size_t(i * w + j)] = sum;
    }
  return p;
}

// The right product passes; each kind of wrong one fails: a tail block of columns or rows left
// out, a block of 16 columns in the middle, A read in the other layout.
void expect_right_passes_and_wrong_fail(const Product& p) {
  CHECK(p.passes());
  Product last_column = p;
  for (int64_t i = 0; i < p.m; ++i) last_column.c[size_t(i * p.w + p.w - 1)] = 0;
  CHECK_FALSE(last_column.passes());
  for (int64_t first : {int64_t(16), p.w / 2 / 16 * 16}) {
    Product block = p;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = first; j < std::min(p.w, first + 16); ++j) block.c[size_t(i * p.w + j)] = 0;
    CHECK_FALSE(block.passes());
  }
  Product last_row = p;
  for (int64_t j = 0; j < p.w; ++j) last_row.c[size_t((p.m - 1) * p.w + j)] = 0;
  CHECK_FALSE(last_row.passes());
  Product misread = p;
  misread.ta = !p.ta;
  if (p.m != p.k) CHECK_FALSE(misread.passes());
}

}  // namespace

TEST_CASE("the product check passes f32 products in every layout and fails wrong ones") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const Product p = product(37, 300, 70, ta, tb, 7);
      expect_right_passes_and_wrong_fail(p);
      // The last term of every sum missing (a tail of the inner dimension): off by more than
      // the rounding of 300 terms allows (over 20000 it would not be).
      CHECK_FALSE(p.without_last_term().passes());
    }
  // Wide tiles (a batch element's whole product, a bf16 block of every column).
  expect_right_passes_and_wrong_fail(product(24, 100, 4096, false, true, 5));
  // Long sums, checked at fewer rows (a filter gradient's A^T B).
  expect_right_passes_and_wrong_fail(product(20, 20000, 40, true, false, 9));
  // A single row, a single column, an inner dimension of one.
  CHECK(product(1, 5, 1, false, false, 3).passes());
  CHECK(product(9, 1, 40, true, false, 4).passes());
}

TEST_CASE("with probe operands, the product check wants the sum to the bit where f32 holds it exactly") {
  for (bool ta : {false, true}) {
    CAPTURE(ta);
    // 3000 terms: every partial sum is below 1024 and exact in f32.
    Product p = product(20, 3000, 40, ta, !ta, 11, Operands::probe);
    expect_right_passes_and_wrong_fail(p);
    // Off by one probe product's step (2^-14) everywhere: within the rounding bound of 3000
    // terms, so it passes as any operands, and fails as probe ones; as does a missing last term.
    Product off = p;
    for (float& x : off.c) x -= 0x1p-14f;
    CHECK_FALSE(off.passes());
    off.operands = Operands::any;
    CHECK(off.passes());
    CHECK_FALSE(p.without_last_term().passes());
  }
  // Positive terms, 40000 of them: the running sums pass 1024 and round in f32; the right
  // product still passes, by the bound.
  Product long_sums = product(8, 40000, 32, true, false, 12, Operands::probe, 1);
  CHECK(long_sums.passes());
  CHECK(std::any_of(long_sums.c.begin(), long_sums.c.end(), [](float x) { return x > 1024; }));
  // Either side of 1024: exact below, the bound above.
  CHECK_FALSE(close_to_probe_sum(1000 + 0x1p-14, 1000, 1000, 4000));
  CHECK(close_to_probe_sum(1000, 1000, 1000, 4000));
  CHECK(close_to_probe_sum(2000 + 0x1p-12, 2000, 2000, 4000));
  CHECK_FALSE(close_to_probe_sum(2000 + 1, 2000, 2000, 4000));
  // An inner dimension of one and of none: exact either way.
  CHECK(product(9, 1, 40, true, false, 4, Operands::probe).passes());
  Product empty = product(3, 0, 5, false, false, 5, Operands::probe);
  CHECK(empty.passes());
  empty.c[0] = 0x1p-14f;
  CHECK_FALSE(empty.passes());
}

#ifdef TPU_HAVE_ONEDNN
// The probe values are exact in bf16, so the check would not see an f32 primitive that rounds
// its operands to bf16, as the process's default math mode (ONEDNN_DEFAULT_FPMATH_MODE) lets
// oneDNN do: every primitive is made in strict f32 instead.
TEST_CASE("oneDNN primitives compute f32 in f32 whatever the process's default math mode") {
  const dnnl::fpmath_mode before = dnnl::get_default_fpmath_mode();
  dnnl::set_default_fpmath_mode(dnnl::fpmath_mode::bf16);
  const dnnl::fpmath_mode made = onednn::primitive_attributes().get_fpmath_mode();
  dnnl::set_default_fpmath_mode(before);
  CHECK(made == dnnl::fpmath_mode::strict);
}
#endif
