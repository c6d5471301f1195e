// Tensor operations as Lua methods and functions. Each one reads its Lua arguments, then hands
// a graph builder to apply_op, which records it (inside tpu.jit) or evaluates it (eagerly).
// Broadcasting (shapes aligned at their trailing dims, size-1 dims stretched) and dtype promotion
// happen here, in the builders; the IR itself is strict.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "lua_internal.h"

namespace tpu {

namespace {

// bool < u8 < i32 < bf16 < f32
int rank_of(DType t) {
  switch (t) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::i32: return 2;
    case DType::bf16: return 3;
    case DType::f32: return 4;
  }
  return 0;
}
DType promote(DType a, DType b) { return rank_of(a) >= rank_of(b) ? a : b; }

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  Shape r(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t da = i < r.size() - a.size() ? 1 : a[i - (r.size() - a.size())];
    int64_t db = i < r.size() - b.size() ? 1 : b[i - (r.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast together");
    r[i] = da == 1 ? db : da;
  }
  return r;
}

// Converts and broadcasts the nodes to one dtype and shape.
std::vector<NodeId> unify(Graph& g, std::vector<NodeId> xs, DType dtype) {
  Shape s;
  for (NodeId x : xs) s = broadcast_shapes(s, g.at(x).shape);
  for (NodeId& x : xs) x = g.broadcast_to(g.convert(x, dtype), s);
  return xs;
}

Operand operand_at(lua_State* L, int idx) {
  Operand o;
  if (lua_isnumber(L, idx)) o.number = lua_tonumber(L, idx);
  else if (lua_isboolean(L, idx)) o.number = lua_toboolean(L, idx);
  else if (is_tensor(L, idx)) o.tensor = check_tensor(L, idx);
  else throw type_error(L, idx, "number or tensor");
  return o;
}

// The dtype a Lua number takes next to these operands (the tensors', promoted; f32 if none).
DType tensor_dtype(const std::vector<Operand>& ops) {
  std::optional<DType> t;
  for (const Operand& o : ops)
    if (o.tensor) t = t ? promote(*t, o.tensor->dtype()) : o.tensor->dtype();
  return t.value_or(DType::f32);
}

DType number_dtype_for(const std::vector<Operand>& ops, lua_State* L, int first, int count) {
  DType t = tensor_dtype(ops);
  // A non-integer Lua number next to an integer tensor makes the result float.
  for (int i = 0; i < count; ++i)
    if (lua_isnumber(L, first + i) && !lua_isinteger(L, first + i) && !is_float(t)) return DType::f32;
  // A Lua integer next to a bool tensor is a count, not a bool: i32 (bool_t + 1 adds, as in JAX).
  for (int i = 0; i < count; ++i)
    if (lua_isinteger(L, first + i) && t == DType::boolean) return DType::i32;
  return t;
}

enum class Arith { add, sub, mul, div, idiv, mod, pow, max, min };

NodeId arith(Graph& g, Arith k, NodeId a, NodeId b) {
  DType t = promote(g.at(a).dtype, g.at(b).dtype);
  if ((k == Arith::div || k == Arith::pow) && !is_float(t)) t = DType::f32;
  // On bools (as JAX): + is logical or, * logical and, max and min stay bool; / and ^ are f32
  // (above), // and % count true as 1 in i32 (JAX promotes them to int); - is refused earlier.
  if (t == DType::boolean && k == Arith::add) k = Arith::max;
  if (t == DType::boolean && k == Arith::mul) k = Arith::min;
  if (t == DType::boolean && k != Arith::max && k != Arith::min) t = DType::i32;
  auto ab = unify(g, {a, b}, t);
  a = ab[0], b = ab[1];
  switch (k) {
    case Arith::add: return g.binary(Op::add, a, b);
    case Arith::sub: return g.binary(Op::sub, a, b);
    case Arith::mul: return g.binary(Op::mul, a, b);
    case Arith::div: return g.binary(Op::div, a, b);
    case Arith::pow: return g.binary(Op::pow, a, b);
    case Arith::max: return g.binary(Op::max, a, b);
    case Arith::min: return g.binary(Op::min, a, b);
    case Arith::idiv:
      // Integer division floors in the kernel (x // 0 is 0: a compiled graph cannot raise).
      return is_float(t) ? g.floor(g.binary(Op::div, a, b)) : g.binary(Op::div, a, b);
    case Arith::mod:
      // Floats: Lua's fmod-then-adjust (the mod op), exact at any quotient.
      if (is_float(t)) return g.binary(Op::mod, a, b);
      return g.binary(Op::sub, a, g.binary(Op::mul, g.binary(Op::div, a, b), b));  // x % 0 is x
  }
  return a;
}

int binary_method(lua_State* L, Arith k) {
  check_no_more(L, 2);
  // Lua's own arithmetic rejects booleans; so does a tensor's (compare with t:eq(true)).
  for (int i = 1; i <= 2; ++i)
    if (lua_isboolean(L, i)) throw type_error(L, i, "number or tensor");
  std::vector<Operand> ops = {operand_at(L, 1), operand_at(L, 2)};
  // JAX's subtract of two bool arrays is a TypeError (lax.sub takes no bools); so is this one.
  if (k == Arith::sub && ops[0].tensor && ops[1].tensor && ops[0].tensor->dtype() == DType::boolean &&
      ops[1].tensor->dtype() == DType::boolean)
    throw Error("bool - bool is not defined (as in JAX): cast to i32 or f32 first (a:cast(\"i32\") - b), "
                "or for a and not b use a * b:eq(false)");
  return apply_op(L, ops, number_dtype_for(ops, L, 1, 2),
                  [k](Graph& g, const std::vector<NodeId>& in) { return arith(g, k, in[0], in[1]); });
}
int l_add(lua_State* L) { return binary_method(L, Arith::add); }
int l_sub(lua_State* L) { return binary_method(L, Arith::sub); }
int l_mul(lua_State* L) { return binary_method(L, Arith::mul); }
int l_div(lua_State* L) { return binary_method(L, Arith::div); }
int l_idiv(lua_State* L) { return binary_method(L, Arith::idiv); }
int l_mod(lua_State* L) { return binary_method(L, Arith::mod); }
int l_pow(lua_State* L) { return binary_method(L, Arith::pow); }
int l_maximum(lua_State* L) { return binary_method(L, Arith::max); }
int l_minimum(lua_State* L) { return binary_method(L, Arith::min); }

int compare_method(lua_State* L, Cmp c) {
  check_no_more(L, 2);
  std::vector<Operand> ops = {operand_at(L, 1), operand_at(L, 2)};
  return apply_op(L, ops, number_dtype_for(ops, L, 1, 2), [c](Graph& g, const std::vector<NodeId>& in) {
    auto ab = unify(g, in, promote(g.at(in[0]).dtype, g.at(in[1]).dtype));
    return g.compare(c, ab[0], ab[1]);
  });
}
int l_lt(lua_State* L) { return compare_method(L, Cmp::lt); }
int l_le(lua_State* L) { return compare_method(L, Cmp::le); }
int l_gt(lua_State* L) { return compare_method(L, Cmp::gt); }
int l_ge(lua_State* L) { return compare_method(L, Cmp::ge); }
int l_eq(lua_State* L) { return compare_method(L, Cmp::eq); }
int l_ne(lua_State* L) { return compare_method(L, Cmp::ne); }

int l_where(lua_State* L) {
  check_no_more(L, 3);
  std::vector<Operand> ops = {operand_at(L, 1), operand_at(L, 2), operand_at(L, 3)};
  std::vector<Operand> values = {ops[1], ops[2]};
  return apply_op(L, ops, number_dtype_for(values, L, 2, 2), [](Graph& g, const std::vector<NodeId>& in) {
    if (g.at(in[0]).dtype != DType::boolean)
      throw Error("where: the condition must be a bool tensor (from lt/le/gt/ge/eq/ne), got " +
                  type_str(g.at(in[0]).dtype, g.at(in[0]).shape));
    DType t = promote(g.at(in[1]).dtype, g.at(in[2]).dtype);
    Shape s = broadcast_shapes(broadcast_shapes(g.at(in[0]).shape, g.at(in[1]).shape), g.at(in[2]).shape);
    NodeId c = g.broadcast_to(in[0], s);
    return g.select(c, g.broadcast_to(g.convert(in[1], t), s), g.broadcast_to(g.convert(in[2], t), s));
  });
}

// operator_call: called as a metamethod (__unm gets its operand twice), so no argument count check.
int unary_method(lua_State* L, Op op, bool operator_call = false) {
  std::vector<Operand> ops = {{check_tensor(L, 1), 0}};
  if (!operator_call) check_no_more(L, 1);
  // JAX's negative of a bool array is a TypeError (lax.neg takes no bools); so is this one.
  if (op == Op::neg && ops[0].tensor->dtype() == DType::boolean)
    throw Error("-bool is not defined (as in JAX): cast to i32 or f32 first (-t:cast(\"i32\")), "
                "or for not t use t:eq(false)");
  return apply_op(L, ops, DType::f32, [op](Graph& g, const std::vector<NodeId>& in) {
    NodeId x = in[0];
    if (op != Op::neg && op != Op::abs && !is_float(g.at(x).dtype)) x = g.convert(x, DType::f32);
    return g.unary(op, x);
  });
}
int l_neg(lua_State* L) { return unary_method(L, Op::neg); }
int l_unm(lua_State* L) { return unary_method(L, Op::neg, true); }
int l_exp(lua_State* L) { return unary_method(L, Op::exp); }
int l_log(lua_State* L) { return unary_method(L, Op::log); }
int l_sqrt(lua_State* L) { return unary_method(L, Op::sqrt); }
int l_rsqrt(lua_State* L) { return unary_method(L, Op::rsqrt); }
int l_tanh(lua_State* L) { return unary_method(L, Op::tanh); }
int l_sigmoid(lua_State* L) { return unary_method(L, Op::sigmoid); }
// jnp.abs returns bools (and unsigned ints) as they are: they have no sign. The tensor itself.
int l_abs(lua_State* L) {
  if (check_tensor(L, 1)->dtype() != DType::boolean) return unary_method(L, Op::abs);
  check_no_more(L, 1);
  lua_settop(L, 1);
  return 1;
}
int l_erf(lua_State* L) { return unary_method(L, Op::erf); }
// jax.lax.stop_gradient: the same values, a constant to tpu.grad. A concrete tensor is one
// already (it is a constant of any trace that reads it): the tensor itself.
int l_stop_gradient(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  check_no_more(L, 1);
  if (!t->traced()) {
    lua_settop(L, 1);
    return 1;
  }
  return apply_op(L, {{t, 0}}, DType::f32, [](Graph& g, const std::vector<NodeId>& in) { return g.stop_gradient(in[0]); });
}

int l_cast(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  DType to = check_dtype(L, 2);
  check_no_more(L, 2);
  return apply_op(L, {{t, 0}}, to, [to](Graph& g, const std::vector<NodeId>& in) { return g.convert(in[0], to); });
}

// matmul: rank-1 operands are promoted to matrices and the added dim removed again;
// leading batch dims broadcast; a matrix b takes all of a's rows in one product. `to` = f32 on bf16 operands keeps the f32 sums (mixed precision).
NodeId matmul(Graph& g, NodeId a, NodeId b, std::optional<DType> to = std::nullopt) {
  const Shape as = g.at(a).shape, bs = g.at(b).shape;
  if (as.empty() || bs.empty()) throw Error("matmul needs tensors of rank >= 1, got " + type_str(g.at(a).dtype, as) + " and " + type_str(g.at(b).dtype, bs));
  DType t = promote(g.at(a).dtype, g.at(b).dtype);
  if (!is_float(t)) t = DType::f32;
  a = g.convert(a, t), b = g.convert(b, t);
  Shape a2 = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape b2 = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  if (a2.back() != b2[b2.size() - 2])
    throw Error("matmul: inner dimensions differ: " + type_str(t, as) + " @ " + type_str(t, bs));
  if (as.size() > 2 && bs.size() == 2) {
    // [..., m, k] @ [k, n]: one product of all the rows, [prod(...) * m, k] @ [k, n]. Batched,
    // b would be broadcast to every batch (stored so) and its gradient summed back over them.
    Shape out(as.begin(), as.end() - 1);
    const int64_t rows = num_elements(out);
    out.push_back(bs[1]);
    return g.reshape(g.dot(g.reshape(a, {rows, as.back()}), b, false, false, to), out);
  }
  Shape batch = broadcast_shapes(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
  Shape at = batch, bt = batch;
  at.insert(at.end(), a2.end() - 2, a2.end());
  bt.insert(bt.end(), b2.end() - 2, b2.end());
  NodeId r = g.dot(g.broadcast_to(g.reshape(a, a2), at), g.broadcast_to(g.reshape(b, b2), bt), false, false, to);
  Shape out = batch;
  if (as.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (bs.size() > 1) out.push_back(b2.back());
  return g.reshape(r, out);
}
// t:matmul(u [, {to = "f32"}]): `to` is the result type, the operands' (promoted) type by
// default; "f32" with bf16 operands gives bf16 products summed in f32. The dot row's shape rule
// refuses any other `to`.
int l_matmul(lua_State* L) {
  std::vector<Operand> ops = {{check_tensor(L, 1), 0}, {check_tensor(L, 2), 0}};
  std::optional<DType> to;
  check_no_more(L, 3);
  if (check_options(L, 3, {"to"})) {
    lua_getfield(L, 3, "to");
    if (!lua_isnil(L, -1)) to = check_dtype_field(L, "to");
    lua_pop(L, 1);
  }
  return apply_op(L, ops, DType::f32, [to](Graph& g, const std::vector<NodeId>& in) { return matmul(g, in[0], in[1], to); });
}

int l_reshape(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  Shape want;
  if (lua_istable(L, 2)) {
    check_no_more(L, 2);
    lua_Integer n = luaL_len(L, 2);
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, 2, i);
      want.push_back(luaL_checkinteger(L, -1));
      lua_pop(L, 1);
    }
  } else {
    for (int i = 2; i <= lua_gettop(L); ++i) want.push_back(luaL_checkinteger(L, i));
  }
  const int64_t total = num_elements(t->shape());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1 && infer < 0) infer = int64_t(i);
    else if (want[i] < 0) throw Error("reshape: bad dimension " + std::to_string(want[i]) + " in " + shape_str(want));
  }
  // The rule first, with the dim to infer as 1: the product of the others cannot overflow then.
  Shape known_dims = want;
  if (infer >= 0) known_dims[size_t(infer)] = 1;
  if (std::string fault = shape_fault(known_dims); !fault.empty())
    throw Error("reshape: shape " + lua_shape_str(want) + " " + fault);
  for (int64_t d : known_dims) known *= d;
  if (infer >= 0) want[size_t(infer)] = known ? total / known : 0;
  if (num_elements(want) != total)
    throw Error("cannot reshape " + type_str(t->dtype(), t->shape()) + " (" + std::to_string(total) +
                            " elements) to " + shape_str(want));
  return apply_op(L, {{t, 0}}, DType::f32, [want](Graph& g, const std::vector<NodeId>& in) { return g.reshape(in[0], want); });
}

// The permutation of transpose's list argument, 0-based; one that is not a permutation is
// reported as the user wrote it (1-based).
std::vector<int64_t> perm_arg(lua_State* L, int arg, LuaTensor* t) {
  const int64_t rank = int64_t(t->shape().size());
  std::vector<int64_t> perm, given;
  for (lua_Integer i = 1; i <= luaL_len(L, arg); ++i) {
    lua_geti(L, arg, i);
    perm.push_back(check_axis(L, arg, rank, lua_gettop(L)));
    given.push_back(lua_tointeger(L, -1));
    lua_pop(L, 1);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  if (int64_t(perm.size()) != rank || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw Error("transpose: " + lua_shape_str(given) + " is not a permutation of the axes of " +
                type_str(t->dtype(), t->shape()) + " (axes are 1-based)");
  return perm;
}

int l_transpose(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  std::vector<int64_t> perm;
  if (lua_isnoneornil(L, 2)) {
    for (int64_t i = int64_t(t->shape().size()) - 1; i >= 0; --i) perm.push_back(i);
  } else {
    if (!lua_istable(L, 2)) throw type_error(L, 2, "table of axes");
    check_no_more(L, 2);
    perm = perm_arg(L, 2, t);
  }
  return apply_op(L, {{t, 0}}, DType::f32, [perm](Graph& g, const std::vector<NodeId>& in) { return g.transpose(in[0], perm); });
}

// The non-negative integers of list `arg`, one per dimension of a rank-`rank` tensor.
Dims margins_arg(lua_State* L, int arg, size_t rank, const char* what) {
  if (!lua_istable(L, arg)) throw type_error(L, arg, "table of integers");
  Dims d;
  for (lua_Integer i = 1; i <= luaL_len(L, arg); ++i) {
    lua_geti(L, arg, i);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0)
      throw Error(std::string("pad: ") + what + " " + std::to_string(i) + " is not a non-negative integer");
    d.push_back(lua_tointeger(L, -1));
    lua_pop(L, 1);
  }
  if (d.size() != rank)
    throw Error(std::string("pad: ") + std::to_string(d.size()) + " " + what + " margins for a tensor of rank " +
                std::to_string(rank));
  return d;
}

// core.pad(x, lo, hi): x with lo[i] zeros before and hi[i] after it along each dimension i.
int l_pad(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  check_no_more(L, 3);
  const Dims lo = margins_arg(L, 2, t->shape().size(), "low"), hi = margins_arg(L, 3, t->shape().size(), "high");
  return apply_op(L, {{t, 0}}, DType::f32,
                  [=](Graph& g, const std::vector<NodeId>& in) { return g.pad(in[0], lo, hi, 0); });
}

bool has_string_key(lua_State* L, int arg) {
  lua_pushnil(L);
  while (lua_next(L, arg)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      lua_pop(L, 1);
      return true;
    }
  }
  return false;
}

// The (axis, keepdims) of a reduction: t:sum(axis, keepdims) or t:sum{axis=, keepdims=};
// `axis` is nil (every axis), an axis or a list of them. Leaves them at slots arg, arg + 1.
void reduce_args(lua_State* L, int arg) {
  if (lua_istable(L, arg) && has_string_key(L, arg)) {
    check_options(L, arg, {"axis", "keepdims"});
    check_no_more(L, arg);
    lua_settop(L, arg);
    lua_getfield(L, arg, "axis");
    if (!lua_isnil(L, -1) && !lua_isinteger(L, -1) && !lua_istable(L, -1))
      throw ArgError(arg, std::string("axis = an integer or a list of them expected, got ") + luaL_typename(L, -1));
    lua_getfield(L, arg, "keepdims");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      throw ArgError(arg, std::string("keepdims = true or false expected, got ") + luaL_typename(L, -1));
    lua_remove(L, arg);
  } else if (!lua_isnoneornil(L, arg) && !lua_isnumber(L, arg) && !lua_istable(L, arg)) {
    throw type_error(L, arg, "number or {axis=, keepdims=}");
  }
  if (!lua_isnoneornil(L, arg + 1) && !lua_isboolean(L, arg + 1)) throw type_error(L, arg + 1, "boolean keepdims");
  check_no_more(L, arg + 1);
}

// sum/max/min(axis, keepdims) or {axis=, keepdims=}
int reduce_method(lua_State* L, ReduceKind k, const char* name) {
  LuaTensor* t = check_tensor(L, 1);
  const Shape shape = t->shape();
  reduce_args(L, 2);
  std::vector<int64_t> axes = check_axes(L, 2, int64_t(shape.size()), name);
  bool keep = lua_toboolean(L, 3);
  return apply_op(L, {{t, 0}}, DType::f32, [=](Graph& g, const std::vector<NodeId>& in) {
    NodeId x = in[0];
    DType dt = g.at(x).dtype;
    if (dt == DType::boolean || (dt == DType::u8 && k == ReduceKind::sum)) x = g.convert(x, DType::i32);
    NodeId r = g.reduce(x, axes, k);
    if (dt == DType::boolean && k != ReduceKind::sum) r = g.convert(r, DType::boolean);  // any / all, as JAX
    if (!keep) return r;
    Shape kept = shape;
    for (int64_t a : axes) kept[size_t(a)] = 1;
    return g.reshape(r, kept);
  });
}
int l_sum(lua_State* L) { return reduce_method(L, ReduceKind::sum, "sum"); }
int l_max(lua_State* L) { return reduce_method(L, ReduceKind::max, "max"); }
int l_min(lua_State* L) { return reduce_method(L, ReduceKind::min, "min"); }

// argmax(axis, keepdims) or {axis=, keepdims=}: one axis, the last by default.
int l_argmax(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  reduce_args(L, 2);
  if (lua_istable(L, 2)) throw type_error(L, 2, "number or {axis=, keepdims=}");
  if (t->shape().empty()) throw Error("argmax of a scalar tensor");
  int64_t axis = lua_isnoneornil(L, 2) ? int64_t(t->shape().size()) - 1 : check_axis(L, 2, int64_t(t->shape().size()));
  const bool keep = lua_toboolean(L, 3);
  Shape kept = t->shape();
  kept[size_t(axis)] = 1;
  return apply_op(L, {{t, 0}}, DType::f32, [=](Graph& g, const std::vector<NodeId>& in) {
    NodeId r = g.argmax(in[0], axis);
    return keep ? g.reshape(r, kept) : r;
  });
}

// A slice that keeps every axis but the first whole: a contiguous run of rows.
bool leading_rows_only(const Shape& shape, const Dims& lo, const Dims& hi) {
  if (shape.empty()) return false;
  for (size_t k = 1; k < shape.size(); ++k)
    if (lo[k] != 0 || hi[k] != shape[k]) return false;
  return true;
}

// A slice bound at the top of the stack: an integer, or a float with an integral value (as
// Lua's own integer arguments); anything else is an error on the ranges argument (2).
int64_t slice_bound(lua_State* L, lua_Integer axis, const char* what) {
  int exact = 0;
  const bool number = lua_type(L, -1) == LUA_TNUMBER;
  const lua_Integer v = number ? lua_tointegerx(L, -1, &exact) : 0;
  if (exact) return v;
  const std::string got = number ? std::string(lua_tostring(L, -1)) + " (not an integer)" : luaL_typename(L, -1);
  throw ArgError(2, "axis " + std::to_string(axis) + ": " + what + " must be an integer, got " + got);
}

// Entry `axis` of slice's ranges (at the top of the stack): an index or {first, last} with
// optional bounds; sets first and last as written (negative counts from the end).
void slice_range(lua_State* L, lua_Integer axis, int64_t& first, int64_t& last) {
  if (lua_type(L, -1) == LUA_TNUMBER) {
    first = last = slice_bound(L, axis, "index");
    return;
  }
  if (!lua_istable(L, -1))
    throw ArgError(2, "axis " + std::to_string(axis) + ": an index or {first, last} expected, got " +
                          luaL_typename(L, -1));
  const size_t length = lua_rawlen(L, -1);
  const bool third = lua_rawgeti(L, -1, 3) != LUA_TNIL;
  lua_pop(L, 1);
  if (length > 2 || third)
    throw ArgError(2, "axis " + std::to_string(axis) + ": a range is {first, last}, got " +
                          std::to_string(std::max<size_t>(length, 3)) + " elements");
  for (int k = 1; k <= 2; ++k) {
    if (lua_geti(L, -1, k) != LUA_TNIL) (k == 1 ? first : last) = slice_bound(L, axis, k == 1 ? "first" : "last");
    lua_pop(L, 1);
  }
}

std::string range_str(int64_t first, int64_t last) {
  return "{" + std::to_string(first) + ", " + std::to_string(last) + "}";
}

// t:slice{{first, last}, ...}: inclusive 1-based ranges; negative counts from the end.
int l_slice(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  if (!lua_istable(L, 2)) throw type_error(L, 2, "table of ranges {{first, last}, ...}");
  check_no_more(L, 2);
  const Shape shape = t->shape();
  Dims lo(shape.size(), 0), hi = shape;
  lua_Integer n = luaL_len(L, 2);
  if (n > lua_Integer(shape.size())) throw Error("slice: " + std::to_string(n) + " ranges for a tensor of rank " + std::to_string(shape.size()));
  for (lua_Integer i = 1; i <= n; ++i) {
    const int64_t d = shape[size_t(i - 1)];
    int64_t first = 1, last = d;
    lua_geti(L, 2, i);
    slice_range(L, i, first, last);
    lua_pop(L, 1);
    const int64_t f = first < 0 ? first + d + 1 : first, l = last < 0 ? last + d + 1 : last;
    if (f < 1 || l > d || f > l + 1)
      throw Error("slice: range " + range_str(first, last) + " is outside axis " + std::to_string(i) + " of " +
                  type_str(t->dtype(), shape));
    lo[size_t(i - 1)] = f - 1;
    hi[size_t(i - 1)] = l;
  }
  if (!t->traced() && leading_rows_only(shape, lo, hi)) {
    // fit's batches of x and y: a copy of contiguous rows, not a graph compiled per offset.
    push_tensor(L, t->value().rows(lo[0], hi[0] - lo[0]).copy());
    return 1;
  }
  return apply_op(L, {{t, 0}}, DType::f32, [=](Graph& g, const std::vector<NodeId>& in) { return g.slice(in[0], lo, hi); });
}

// Gather along an axis: result is x.shape[:axis] + idx.shape + x.shape[axis+1:].
NodeId take(Graph& g, NodeId x, NodeId idx, int64_t axis) {
  const Shape xs = g.at(x).shape;
  const int64_t rank = int64_t(xs.size()), irank = int64_t(g.at(idx).shape.size());
  std::vector<int64_t> front = {axis};
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis) front.push_back(i);
  NodeId r = g.gather(g.transpose(x, front), idx);  // [idx..., x dims except axis]
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < axis; ++i) perm.push_back(irank + i);
  for (int64_t i = 0; i < irank; ++i) perm.push_back(i);
  for (int64_t i = axis + 1; i < rank; ++i) perm.push_back(irank + i - 1);
  return g.transpose(r, perm);
}
int l_take(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  check_no_more(L, 3);
  if (t->shape().empty()) throw Error("take from a scalar tensor");
  int64_t axis = lua_isnoneornil(L, 3) ? 0 : check_axis(L, 3, int64_t(t->shape().size()));
  Operand idx = operand_at(L, 2);
  if (idx.tensor && idx.tensor->dtype() == DType::boolean) {  // masking: rule 2 when traced
    lua_getfield(L, LUA_REGISTRYINDEX, "tpu.Tensor.methods");
    lua_getfield(L, -1, "boolean_mask");
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 2, 1);
    return 1;
  }
  if (idx.tensor && !is_integer(idx.tensor->dtype()))
    throw Error("take: indices must be an integer tensor, got " + type_str(idx.tensor->dtype(), idx.tensor->shape()));
  Shape taken(t->shape().begin(), t->shape().begin() + axis);  // x dims before axis, idx dims, the rest
  if (idx.tensor) taken.insert(taken.end(), idx.tensor->shape().begin(), idx.tensor->shape().end());
  taken.insert(taken.end(), t->shape().begin() + axis + 1, t->shape().end());
  check_lua_shape(L, taken, "take");
  return apply_op(L, {{t, 0}, idx}, DType::i32,
                  [axis](Graph& g, const std::vector<NodeId>& in) { return take(g, in[0], in[1], axis); });
}

int l_one_hot(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  int is_int = 0;  // a float with an integral value counts, as in Lua's own libraries
  const lua_Integer depth = lua_tointegerx(L, 2, &is_int);
  if (!is_int || lua_type(L, 2) != LUA_TNUMBER) throw type_error(L, 2, "integer depth");
  check_options(L, 3, {"dtype"});
  check_no_more(L, 3);
  if (depth <= 0) throw Error("one_hot: depth must be positive, got " + std::to_string(depth));
  DType dt = opt_dtype_field(L, 3, DType::f32);
  if (!is_integer(t->dtype())) throw Error("one_hot needs integer labels, got " + type_str(t->dtype(), t->shape()));
  Shape hot = t->shape();
  hot.push_back(depth);
  check_lua_shape(L, hot, "one_hot");
  return apply_op(L, {{t, 0}}, DType::i32, [=](Graph& g, const std::vector<NodeId>& in) {
    Shape s = g.at(in[0]).shape;
    std::vector<int64_t> dims(s.size());
    std::iota(dims.begin(), dims.end(), 0);
    s.push_back(depth);
    NodeId labels = g.broadcast(g.convert(in[0], DType::i32), s, dims);
    NodeId hot = g.compare(Cmp::eq, labels, g.iota(DType::i32, s, int64_t(s.size()) - 1));
    return g.convert(hot, dt);
  });
}

int l_concat(lua_State* L) {
  if (!lua_istable(L, 1)) throw type_error(L, 1, "list of tensors");
  check_no_more(L, 2);
  std::vector<Operand> ops;
  for (lua_Integer i = 1; i <= luaL_len(L, 1); ++i) {
    lua_geti(L, 1, i);
    ops.push_back({check_tensor(L, -1), 0});  // the list keeps the userdata alive
    lua_pop(L, 1);
  }
  if (ops.empty()) throw Error("concat of an empty list");
  int64_t rank = int64_t(ops[0].tensor->shape().size());
  int64_t axis = lua_isnoneornil(L, 2) ? 0 : check_axis(L, 2, rank);
  DType t = tensor_dtype(ops);
  return apply_op(L, ops, t, [=](Graph& g, const std::vector<NodeId>& in) {
    std::vector<NodeId> xs;
    for (NodeId x : in) xs.push_back(g.convert(x, t));
    return g.concat(xs, axis);
  });
}

const LuaFunction kMethods[] = {
    fn<l_add>("add"), fn<l_sub>("sub"), fn<l_mul>("mul"), fn<l_div>("div"),
    fn<l_pow>("pow"), fn<l_maximum>("maximum"), fn<l_minimum>("minimum"),
    fn<l_lt>("lt"), fn<l_le>("le"), fn<l_gt>("gt"), fn<l_ge>("ge"),
    fn<l_eq>("eq"), fn<l_ne>("ne"), fn<l_neg>("neg"), fn<l_exp>("exp"),
    fn<l_log>("log"), fn<l_sqrt>("sqrt"), fn<l_rsqrt>("rsqrt"),
    fn<l_tanh>("tanh"), fn<l_sigmoid>("sigmoid"), fn<l_abs>("abs"),
    fn<l_erf>("erf"), fn<l_stop_gradient>("stop_gradient"), fn<l_cast>("cast"), fn<l_matmul>("matmul"),
    fn<l_reshape>("reshape"), fn<l_transpose>("transpose"), fn<l_sum>("sum"),
    fn<l_max>("max"), fn<l_min>("min"), fn<l_argmax>("argmax"),
    fn<l_slice>("slice"), fn<l_take>("take"), fn<l_one_hot>("one_hot")};

const LuaFunction kMetaOps[] = {
    fn<l_add>("__add"), fn<l_sub>("__sub"), fn<l_mul>("__mul"),
    fn<l_div>("__div"), fn<l_idiv>("__idiv"), fn<l_mod>("__mod"),
    fn<l_pow>("__pow"), fn<l_unm>("__unm")};

const LuaFunction kFunctions[] = {
    fn<l_where>("where"), fn<l_concat>("concat"), fn<l_pad>("pad")};

}  // namespace

void register_tensor_ops(lua_State* L, int methods, int core) {
  lua_pushvalue(L, methods);
  set_functions(L, -1, kMethods);
  lua_pop(L, 1);
  register_nn_ops(L, methods, core);
  luaL_getmetatable(L, kTensorMeta);
  set_functions(L, -1, kMetaOps);
  lua_pop(L, 1);
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  set_functions(L, -1, kMethods);
  lua_pop(L, 1);
}

}  // namespace tpu
