// Stateless, counter-based random numbers: element i of a draw with key k is a hash of (k, i),
// so results depend only on the key and never on threads or call order.
#include <cmath>

#include "lua_internal.h"

namespace tpu {

namespace {

uint64_t mix(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double unit(uint64_t key, uint64_t i) {  // uniform in [0, 1) with 53 random bits
  return double(mix(key ^ mix(i)) >> 11) * 0x1.0p-53;
}

double opt_number_field(lua_State* L, int arg, const char* name, double def) {
  if (!lua_istable(L, arg)) return def;
  lua_getfield(L, arg, name);
  double v = luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

// core.random_mix(a, b) -> integer: derives keys (split, fold_in).
int l_random_mix(lua_State* L) {
  uint64_t a = uint64_t(luaL_checkinteger(L, 1));
  uint64_t b = uint64_t(luaL_optinteger(L, 2, 0));
  lua_pushinteger(L, lua_Integer(mix(a ^ mix(b + 0x632be59bd9b4e019ull))));
  return 1;
}

// core.random_uniform(key, shape, {minval=0, maxval=1, dtype="f32"})
int l_random_uniform(lua_State* L) {
  uint64_t key = uint64_t(luaL_checkinteger(L, 1));
  Shape s = check_shape(L, 2);
  double lo = opt_number_field(L, 3, "minval", 0), hi = opt_number_field(L, 3, "maxval", 1);
  Tensor t(opt_dtype_field(L, 3, DType::f32), s);
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, lo + (hi - lo) * unit(key, uint64_t(i)));
  push_tensor(L, std::move(t));
  return 1;
}

// core.random_normal(key, shape, {mean=0, stddev=1, truncated=false}) (Box-Muller)
int l_random_normal(lua_State* L) {
  uint64_t key = uint64_t(luaL_checkinteger(L, 1));
  Shape s = check_shape(L, 2);
  double mean = opt_number_field(L, 3, "mean", 0), sd = opt_number_field(L, 3, "stddev", 1);
  bool truncated = false;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "truncated");
    truncated = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  Tensor t(opt_dtype_field(L, 3, DType::f32), s);
  for (int64_t i = 0; i < t.size(); ++i) {
    double z = 0;
    for (uint64_t attempt = 0;; ++attempt) {
      uint64_t c = uint64_t(i) * 64 + attempt;
      double u1 = 1.0 - unit(key, 2 * c), u2 = unit(key, 2 * c + 1);
      z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
      if (!truncated || std::fabs(z) <= 2.0 || attempt == 63) break;
    }
    t.set(i, mean + sd * z);
  }
  push_tensor(L, std::move(t));
  return 1;
}

const luaL_Reg kFunctions[] = {{"random_mix", l_random_mix},
                               {"random_uniform", l_random_uniform},
                               {"random_normal", l_random_normal},
                               {nullptr, nullptr}};

}  // namespace

void register_random_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  luaL_setfuncs(L, kFunctions, 0);
  lua_pop(L, 1);
}

}  // namespace tpu
