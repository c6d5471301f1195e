// Stateless, counter-based random numbers for stdlib/tpu/random.lua. A key is an i32[2]
// tensor (a 64-bit stream key); every draw and every derived key is an `rng` op, so the
// same code runs eagerly and inside tpu.jit (with the key a traced argument) and gives the
// same values either way.
#include <cmath>

#include "core/error.h"
#include "lua_internal.h"

namespace tpu {

namespace {

uint64_t mix(uint64_t z) {  // splitmix64's finaliser, as the rng kernel uses
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double opt_number_field(lua_State* L, int arg, const char* name, double def) {
  if (!lua_istable(L, arg)) return def;
  lua_getfield(L, arg, name);
  if (!lua_isnil(L, -1) && !lua_isnumber(L, -1))
    throw Error(std::string(name) + " must be a number, got " + luaL_typename(L, -1));
  double v = luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

bool opt_bool_field(lua_State* L, int arg, const char* name) {
  if (!lua_istable(L, arg)) return false;
  lua_getfield(L, arg, name);
  if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
    throw Error(std::string(name) + " must be true or false, got " + luaL_typename(L, -1));
  bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

LuaTensor* check_key(lua_State* L, int arg) {
  LuaTensor* k = test_tensor(L, arg);
  if (!k || k->dtype() != DType::i32 || k->shape() != Shape{2})
    throw Error(std::string("expected a key from tpu.random.key(seed), got ") +
                            (k ? type_str(k->dtype(), k->shape()) : luaL_typename(L, arg)));
  return check_tensor(L, arg);
}

// core.random_key(seed) -> i32[2]: seed a Lua integer, or an integer scalar tensor (traced
// or not; the same key as the integer of the same value).
int l_random_key(lua_State* L) {
  if (lua_isinteger(L, 1)) {
    const uint64_t k = mix(uint64_t(lua_tointeger(L, 1)) ^ mix(0x632be59bd9b4e019ull));
    Tensor t(DType::i32, {2});
    t.data<int32_t>()[0] = int32_t(uint32_t(k >> 32));
    t.data<int32_t>()[1] = int32_t(uint32_t(k));
    push_tensor(L, std::move(t));
    return 1;
  }
  LuaTensor* seed = test_tensor(L, 1);
  if (!seed || !seed->shape().empty() || !is_integer(seed->dtype()))
    throw Error(std::string("tpu.random.key needs an integer seed, got ") +
                            (seed ? type_str(seed->dtype(), seed->shape()) : luaL_tolstring(L, 1, nullptr)));
  return apply_op(L, {{seed, 0}}, DType::i32, [](Graph& g, const std::vector<NodeId>& in) {
    NodeId s = g.reshape(g.convert(in[0], DType::i32), {1});
    NodeId negative = g.compare(Cmp::lt, s, g.full(DType::i32, {1}, 0));
    NodeId high = g.select(negative, g.full(DType::i32, {1}, -1), g.full(DType::i32, {1}, 0));
    return g.rng_fold(g.concat({high, s}, 0), g.scalar(DType::i32, 0));
  });
}

// core.random_fold(key, data, offset) -> i32[2]: the key derived from key and data + offset
// (data a Lua integer or an integer scalar tensor).
int l_random_fold(lua_State* L) {
  LuaTensor* key = check_key(L, 1);
  const lua_Integer offset = luaL_optinteger(L, 3, 0);
  Operand data;
  if (lua_isinteger(L, 2)) {
    const lua_Integer d = lua_tointeger(L, 2) + offset;
    if (d < INT32_MIN || d > INT32_MAX)
      throw Error("fold_in: " + std::to_string(d - offset) + " does not fit in 32 bits");
    data.number = double(d);
  } else {
    data.tensor = test_tensor(L, 2);
    if (!data.tensor || !data.tensor->shape().empty() || !is_integer(data.tensor->dtype()))
      throw Error(std::string("fold_in needs an integer or an integer scalar tensor, got ") +
                              (data.tensor ? type_str(data.tensor->dtype(), data.tensor->shape()) : luaL_typename(L, 2)));
  }
  return apply_op(L, {{key, 0}, data}, DType::i32, [offset, number = !data.tensor](Graph& g, const std::vector<NodeId>& in) {
    NodeId d = g.convert(in[1], DType::i32);
    if (!number && offset) d = g.binary(Op::add, d, g.scalar(DType::i32, double(offset)));
    return g.rng_fold(in[0], d);
  });
}

// core.random_uniform(key, shape, {minval=0, maxval=1, dtype="f32"})
int l_random_uniform(lua_State* L) {
  LuaTensor* key = check_key(L, 1);
  Shape s = check_shape(L, 2, "random.uniform");
  check_options(L, 3, {"minval", "maxval", "dtype"});
  const double lo = opt_number_field(L, 3, "minval", 0), hi = opt_number_field(L, 3, "maxval", 1);
  const DType dtype = opt_dtype_field(L, 3, DType::f32);
  return apply_op(L, {{key, 0}}, DType::f32, [=](Graph& g, const std::vector<NodeId>& in) {
    NodeId u = g.rng(in[0], RngKind::uniform, s);
    if (hi - lo != 1) u = g.binary(Op::mul, u, g.full(DType::f32, s, hi - lo));
    if (lo != 0) u = g.binary(Op::add, u, g.full(DType::f32, s, lo));
    return g.convert(u, dtype);
  });
}

// core.random_normal(key, shape, {mean=0, stddev=1, truncated=false, dtype="f32"}); truncated
// draws lie within two standard deviations.
int l_random_normal(lua_State* L) {
  LuaTensor* key = check_key(L, 1);
  Shape s = check_shape(L, 2, "random.normal");
  check_options(L, 3, {"mean", "stddev", "truncated", "dtype"});
  const double mean = opt_number_field(L, 3, "mean", 0), sd = opt_number_field(L, 3, "stddev", 1);
  const RngKind kind = opt_bool_field(L, 3, "truncated") ? RngKind::truncated_normal : RngKind::normal;
  const DType dtype = opt_dtype_field(L, 3, DType::f32);
  return apply_op(L, {{key, 0}}, DType::f32, [=](Graph& g, const std::vector<NodeId>& in) {
    NodeId z = g.rng(in[0], kind, s);
    if (sd != 1) z = g.binary(Op::mul, z, g.full(DType::f32, s, sd));
    if (mean != 0) z = g.binary(Op::add, z, g.full(DType::f32, s, mean));
    return g.convert(z, dtype);
  });
}

// core.random_bits(key, shape) -> i32 of uniformly random bits.
int l_random_bits(lua_State* L) {
  LuaTensor* key = check_key(L, 1);
  Shape s = check_shape(L, 2, "random.bits");
  return apply_op(L, {{key, 0}}, DType::i32,
                  [s](Graph& g, const std::vector<NodeId>& in) { return g.rng(in[0], RngKind::bits, s); });
}

// core.random_bernoulli(key, shape, p) -> bool: true where random_uniform(key, shape) is
// below p (a number, rounded to f32 as the comparison rounds it), both made in one kernel.
int l_random_bernoulli(lua_State* L) {
  LuaTensor* key = check_key(L, 1);
  Shape s = check_shape(L, 2, "random.bernoulli");
  const double p = luaL_checknumber(L, 3);
  return apply_op(L, {{key, 0}, {nullptr, p}}, DType::f32,
                  [s](Graph& g, const std::vector<NodeId>& in) { return g.rng_bernoulli(in[0], in[1], s); });
}

const LuaFunction kFunctions[] = {
    fn<l_random_key>("random_key"), fn<l_random_fold>("random_fold"),
    fn<l_random_uniform>("random_uniform"), fn<l_random_normal>("random_normal"),
    fn<l_random_bits>("random_bits"), fn<l_random_bernoulli>("random_bernoulli")};

}  // namespace

void register_random_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
