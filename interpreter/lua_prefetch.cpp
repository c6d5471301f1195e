// core.batch_prefetcher(tensors, depth): the Lua face of tpu::BatchPrefetcher. The stdlib's
// prefetch(n) pushes index lists (0-based rows) and pops gathered batches; the background
// thread never touches the Lua state. close(), __close and __gc stop the thread.
#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "data/prefetch.h"
#include "lua_data.h"
#include "lua_internal.h"

namespace tpu {

namespace {

constexpr const char* kPrefetcherMeta = "tpu.BatchPrefetcher";

struct LuaPrefetcher {
  std::unique_ptr<BatchPrefetcher> p;
};

LuaPrefetcher* check_prefetcher(lua_State* L) {
  return static_cast<LuaPrefetcher*>(luaL_checkudata(L, 1, kPrefetcherMeta));
}

BatchPrefetcher& open_prefetcher(lua_State* L) {
  LuaPrefetcher* lp = check_prefetcher(L);
  if (!lp->p) luaL_error(L, "the batch prefetcher is closed");
  return *lp->p;
}

// Reads the list of tensors at `arg` into `out`; returns an error message or "".
std::string read_sources(lua_State* L, int arg, std::vector<Tensor>& out) {
  for (lua_Integer i = 1; lua_geti(L, arg, i) != LUA_TNIL; ++i) {
    LuaTensor* t = test_tensor(L, -1);
    lua_pop(L, 1);
    if (!t || t->traced() || t->value.rank() == 0)
      return "batch_prefetcher: source " + std::to_string(i) + " is not a concrete tensor with rows";
    out.push_back(t->value);
  }
  lua_pop(L, 1);
  return out.empty() ? "batch_prefetcher: no source tensors" : "";
}

// core.batch_prefetcher(tensors, depth)
int l_new(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer depth = luaL_checkinteger(L, 2);
  auto* lp = static_cast<LuaPrefetcher*>(lua_newuserdatauv(L, sizeof(LuaPrefetcher), 0));
  new (lp) LuaPrefetcher{};
  luaL_setmetatable(L, kPrefetcherMeta);
  bool ok = false;
  {
    std::vector<Tensor> sources;
    std::string error = read_sources(L, 1, sources);
    if (error.empty()) {
      try {
        lp->p = std::make_unique<BatchPrefetcher>(std::move(sources), size_t(depth < 1 ? 1 : depth));
        ok = true;
      } catch (const std::exception& e) {
        error = std::string("batch_prefetcher: cannot start the thread: ") + e.what();
      }
    }
    if (!ok) lua_pushstring(L, error.c_str());
  }
  return ok ? 1 : lua_error(L);
}

// p:push(indices): a list of 0-based row numbers
int l_push(lua_State* L) {
  BatchPrefetcher& p = open_prefetcher(L);
  p.push(row_indices(L, 2, "push"));
  return 0;
}

// p:pop() -> list of tensors (one per source), or nil when nothing is pending
int l_pop(lua_State* L) {
  BatchPrefetcher& p = open_prefetcher(L);
  int results = -1;
  try {
    std::optional<std::vector<Tensor>> batch = p.pop();
    if (batch) {
      lua_createtable(L, int(batch->size()), 0);
      for (size_t i = 0; i < batch->size(); ++i) {
        push_tensor(L, std::move((*batch)[i]));
        lua_seti(L, -2, lua_Integer(i + 1));
      }
    } else {
      lua_pushnil(L);
    }
    results = 1;
  } catch (const std::exception& e) {
    lua_pushstring(L, (user_where(L) + "prefetch: " + e.what()).c_str());
  }
  return results < 0 ? lua_error(L) : results;
}

int l_pending(lua_State* L) {
  lua_pushinteger(L, lua_Integer(open_prefetcher(L).pending()));
  return 1;
}

// p:stats() -> {batches, ready, gather_ms, wait_ms}
int l_stats(lua_State* L) {
  const BatchPrefetcher::Stats s = open_prefetcher(L).stats();
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, s.batches);
  lua_setfield(L, -2, "batches");
  lua_pushinteger(L, s.ready);
  lua_setfield(L, -2, "ready");
  lua_pushnumber(L, s.gather_ms);
  lua_setfield(L, -2, "gather_ms");
  lua_pushnumber(L, s.wait_ms);
  lua_setfield(L, -2, "wait_ms");
  return 1;
}

int l_close(lua_State* L) {
  check_prefetcher(L)->p.reset();
  return 0;
}

int l_gc(lua_State* L) {
  check_prefetcher(L)->~LuaPrefetcher();
  return 0;
}

const luaL_Reg kMethods[] = {
    {"push", l_push}, {"pop", l_pop}, {"pending", l_pending}, {"stats", l_stats}, {"close", l_close}, {nullptr, nullptr},
};

}  // namespace

void register_prefetcher(lua_State* L, int core_table_index) {
  const int core = lua_absindex(L, core_table_index);
  luaL_newmetatable(L, kPrefetcherMeta);
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_close);
  lua_setfield(L, -2, "__close");
  lua_newtable(L);
  luaL_setfuncs(L, kMethods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_new);
  lua_setfield(L, core, "batch_prefetcher");
}

}  // namespace tpu
