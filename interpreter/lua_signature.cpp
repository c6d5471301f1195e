// core.signature(v, shape_dtype_meta[, with_spec]) -> leaves, key, any_traced, any_shape_only
// [, spec]: the tensor leaves of the argument tree v and its signature, the cache key of a
// tpu.jit call; with_spec also gives the tree's spec that jit.unflatten rebuilds it from. The
// only walk of argument trees (jit.flatten is this one), in C because a train step calls it on
// every step with dozens of leaves, where a walk in Lua showed in each step's host time.
//
// A spec is `true` for a leaf, {static = v} for a non-tensor value, {object = mt, child = spec}
// for an object with a tree protocol and {keys = {...}, children = {...}} for a plain table.
#include <algorithm>
#include <string>
#include <vector>

#include "lua_internal.h"

namespace tpu {
namespace {

struct Walk {
  lua_State* L;
  int leaves;           // stack index of the leaves table
  int shape_dtype;      // stack index of the ShapeDtype metatable (or nil)
  bool with_spec;       // each value() leaves its spec on the stack
  std::string key;
  lua_Integer count = 0;
  bool any_traced = false, any_shape_only = false, any_donated = false;

  void piece(std::string_view s) {
    if (!key.empty()) key += ' ';
    key += s;
  }
  void add_leaf(int v) {
    lua_pushvalue(L, v);
    lua_rawseti(L, leaves, ++count);
    if (with_spec) lua_pushboolean(L, true);
  }
  void spec_field(int spec, const char* name, int v) {  // spec.name = v
    if (!with_spec) return;
    lua_pushvalue(L, v);
    lua_setfield(L, spec, name);
  }
  int new_spec() {  // pushes an empty spec table when specs are wanted; its index, or 0
    if (!with_spec) return 0;
    lua_newtable(L);
    return lua_gettop(L);
  }
  void set_child(int children, lua_Integer i) {  // children[i] = the spec on top
    if (with_spec) lua_rawseti(L, children, i);
  }
  void value(int v);
  void shape_only(int v);
  void object(int v);
  void table(int v);
  void list_table(int v, lua_Integer n);
};

std::string lua_string(lua_State* L, int v) {  // tostring(v)
  size_t n = 0;
  const char* s = luaL_tolstring(L, v, &n);
  std::string out(s, n);
  lua_pop(L, 1);
  return out;
}

void Walk::value(int v) {
  v = lua_absindex(L, v);
  luaL_checkstack(L, 12, "argument tree too deep");
  if (LuaTensor* t = test_tensor(L, v)) {
    any_donated = any_donated || t->donated_to || (!t->traced() && t->value().released());
    any_traced = any_traced || t->traced();
    add_leaf(v);
    piece(type_str(t->dtype(), t->shape()));
    return;
  }
  if (lua_type(L, v) == LUA_TTABLE && lua_getmetatable(L, v)) {
    const bool is_shape = lua_rawequal(L, -1, shape_dtype);
    lua_pop(L, 1);
    if (is_shape) return shape_only(v);
    lua_getmetatable(L, v);
    const bool is_tree = lua_getfield(L, -1, "__tpu_tree") != LUA_TNIL;
    lua_pop(L, 2);
    if (is_tree) return object(v);
  } else if (lua_type(L, v) == LUA_TTABLE) {
    return table(v);
  }
  piece(std::string(luaL_typename(L, v)) + ":" + lua_string(L, v));
  const int spec = new_spec();
  spec_field(spec, "static", v);
}

// A tpu.shape_dtype leaf: "f32[8,16]".
void Walk::shape_only(int v) {
  any_shape_only = true;
  add_leaf(v);
  lua_getfield(L, v, "dtype");
  std::string s = lua_string(L, -1) + "[";
  lua_pop(L, 1);
  lua_getfield(L, v, "shape");
  const lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, -1, i);
    s += (i > 1 ? "," : "") + lua_string(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  piece(s + "]");
}

// An object with a tree protocol: mt.__tpu_tree(v) gives its children as a plain table.
void Walk::object(int v) {
  const int spec = new_spec();
  lua_getmetatable(L, v);
  const int mt = lua_gettop(L);
  spec_field(spec, "object", mt);
  lua_getfield(L, mt, "__name");
  piece((lua_isnil(L, -1) ? std::string("object") : lua_string(L, -1)) + "<");
  lua_pop(L, 1);
  lua_getfield(L, mt, "__tpu_tree");
  lua_pushvalue(L, v);
  lua_call(L, 1, 1);
  value(-1);
  if (with_spec) lua_setfield(L, spec, "child");
  lua_pop(L, 2);
  piece(">");
}

// Whether table key a sorts before b as jit.lua's sorted_keys orders them: by type name, then
// numbers and strings by <, anything else by tostring.
bool key_before(lua_State* L, int a, int b) {
  const int ta = lua_type(L, a), tb = lua_type(L, b);
  if (ta != tb) return std::string_view(lua_typename(L, ta)) < std::string_view(lua_typename(L, tb));
  if (ta == LUA_TNUMBER || ta == LUA_TSTRING) return lua_compare(L, a, b, LUA_OPLT);
  return lua_string(L, a) < lua_string(L, b);
}

void Walk::table(int v) {
  const lua_Integer n = lua_Integer(lua_rawlen(L, v));
  lua_Integer keys = 0;
  for (lua_pushnil(L); lua_next(L, v); lua_pop(L, 1)) ++keys;
  bool list = keys == n;
  for (lua_Integer i = 1; list && i <= n; ++i) {
    list = lua_rawgeti(L, v, i) != LUA_TNIL;
    lua_pop(L, 1);
  }
  if (list) return list_table(v, n);
  const int spec = new_spec();
  lua_createtable(L, int(keys), 0);  // the keys, sorted through their positions in it
  const int names = lua_gettop(L);
  lua_Integer k = 0;
  for (lua_pushnil(L); lua_next(L, v); lua_pop(L, 1)) {
    lua_pushvalue(L, -2);
    lua_rawseti(L, names, ++k);
  }
  std::vector<lua_Integer> order(static_cast<size_t>(keys));
  for (size_t i = 0; i < order.size(); ++i) order[i] = lua_Integer(i + 1);
  std::sort(order.begin(), order.end(), [&](lua_Integer a, lua_Integer b) {
    lua_rawgeti(L, names, a);
    lua_rawgeti(L, names, b);
    const bool before = key_before(L, -2, -1);
    lua_pop(L, 2);
    return before;
  });
  const int sorted = new_spec(), children = new_spec();
  piece("{");
  lua_Integer j = 0;
  for (lua_Integer i : order) {
    lua_rawgeti(L, names, i);
    piece(lua_string(L, -1) + "=");
    if (with_spec) {
      lua_pushvalue(L, -1);
      lua_rawseti(L, sorted, ++j);
    }
    lua_rawget(L, v);
    value(-1);
    set_child(children, j);
    lua_pop(L, 1);
  }
  piece("}");
  spec_field(spec, "keys", sorted);
  spec_field(spec, "children", children);
  lua_settop(L, spec ? spec : names - 1);
}

// A list (keys 1..n): the count says it all.
void Walk::list_table(int v, lua_Integer n) {
  const int spec = new_spec(), keys = new_spec(), children = new_spec();
  piece("[" + std::to_string(n));
  for (lua_Integer i = 1; i <= n; ++i) {
    if (with_spec) {
      lua_pushinteger(L, i);
      lua_rawseti(L, keys, i);
    }
    lua_rawgeti(L, v, i);
    value(-1);
    set_child(children, i);
    lua_pop(L, 1);
  }
  piece("]");
  spec_field(spec, "keys", keys);
  spec_field(spec, "children", children);
  if (with_spec) lua_settop(L, spec);
}

int l_signature(lua_State* L) {
  lua_settop(L, 3);
  const bool with_spec = lua_toboolean(L, 3);
  lua_newtable(L);  // 4: the leaves
  lua_Integer leaves = 0;
  bool donated = false;
  {
    Walk w{L, 4, 2, with_spec, {}};
    w.value(1);  // 5: the spec, when wanted
    lua_pushvalue(L, 4);
    lua_pushlstring(L, w.key.data(), w.key.size());
    lua_pushboolean(L, w.any_traced);
    lua_pushboolean(L, w.any_shape_only);
    if (with_spec) lua_pushvalue(L, 5);
    leaves = w.count;
    donated = w.any_donated;
  }
  // Using a donated or released tensor is an error (checked here, after the walk).
  for (lua_Integer i = 1; donated && i <= leaves; ++i) {
    lua_rawgeti(L, 4, i);
    if (test_tensor(L, -1)) check_tensor(L, -1);
    lua_pop(L, 1);
  }
  return with_spec ? 5 : 4;
}

const LuaFunction kFunctions[] = {fn<l_signature>("signature")};

}  // namespace

void register_signature_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
