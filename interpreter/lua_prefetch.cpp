// core.batch_prefetcher(tensors or image reader, depth): the Lua face of tpu::BatchPrefetcher.
// The stdlib's prefetch(n) pushes index lists (0-based rows), with the compiled maps to run on
// each batch, and pops finished batches (rows of the tensors, or images an image reader
// decodes, then mapped); the background thread never touches the Lua state. close(), __close
// and __gc stop the thread.
#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "data/image_folder.h"
#include "data/prefetch.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
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
  if (!lp->p) throw Error("the batch prefetcher is closed");
  return *lp->p;
}

// The list of tensors at `arg`.
std::vector<Tensor> read_sources(lua_State* L, int arg) {
  std::vector<Tensor> out;
  for (lua_Integer i = 1; lua_geti(L, arg, i) != LUA_TNIL; ++i) {
    LuaTensor* t = test_tensor(L, -1);
    lua_pop(L, 1);
    if (!t || t->traced() || t->value().rank() == 0)
      throw Error("batch_prefetcher: source " + std::to_string(i) + " is not a concrete tensor with rows");
    out.push_back(t->value());
  }
  lua_pop(L, 1);
  if (out.empty()) throw Error("batch_prefetcher: no source tensors");
  return out;
}

// The batches of an image reader, or the rows of the list of tensors at `arg`.
BatchPrefetcher::Gather gather_of(lua_State* L, int arg) {
  if (std::shared_ptr<const ImageBatchSpec> spec = test_image_reader(L, arg))
    return [spec](const std::vector<int64_t>& indices) { return read_image_batch(*spec, indices); };
  return BatchPrefetcher::rows_of(read_sources(L, arg));
}

// core.batch_prefetcher(tensors or image reader, depth)
int l_new(lua_State* L) {
  if (!lua_isuserdata(L, 1)) luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer depth = luaL_checkinteger(L, 2);
  auto* lp = static_cast<LuaPrefetcher*>(lua_newuserdatauv(L, sizeof(LuaPrefetcher), 0));
  new (lp) LuaPrefetcher{};
  luaL_setmetatable(L, kPrefetcherMeta);
  BatchPrefetcher::Gather gather = gather_of(L, 1);
  try {
    lp->p = std::make_unique<BatchPrefetcher>(std::move(gather), size_t(depth < 1 ? 1 : depth));
  } catch (const std::exception& e) {
    throw Error(std::string("batch_prefetcher: cannot start the thread: ") + e.what());
  }
  return 1;
}

// One compiled function the thread applies to a gathered batch: its arguments are the batch's
// tensors (the previous stage's results), then `extra` (a map's random key).
struct Stage {
  std::shared_ptr<Executable> exe;
  std::vector<Tensor> extra;
};

// The stages at `arg`: a list of {exe, extra tensor, ...}.
std::vector<Stage> read_stages(lua_State* L, int arg) {
  if (!lua_istable(L, arg)) throw Error("batch_prefetcher: push's stages must be a list");
  std::vector<Stage> stages;
  for (lua_Integer i = 1; lua_geti(L, arg, i) != LUA_TNIL; ++i) {
    if (!lua_istable(L, -1)) throw Error("batch_prefetcher: stage " + std::to_string(i) + " is not a table");
    lua_geti(L, -1, 1);
    Stage s{test_executable(L, -1), {}};
    lua_pop(L, 1);
    if (!s.exe) throw Error("batch_prefetcher: stage " + std::to_string(i) + " has no compiled executable");
    if (!s.exe->donated_args().empty()) throw Error("batch_prefetcher: a stage's function donates its arguments");
    for (lua_Integer k = 2; lua_geti(L, -1, k) != LUA_TNIL; ++k) {
      LuaTensor* t = check_tensor(L, -1);
      if (t->traced()) throw Error("batch_prefetcher: a stage's extra argument is not a concrete tensor");
      s.extra.push_back(t->value());
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
    stages.push_back(std::move(s));
  }
  lua_pop(L, 1);
  return stages;
}

// Runs the stages in order on the prefetch thread, serially there (thread_pool.h), outside
// op_times (the thread's time is the prefetcher's map_ms).
BatchPrefetcher::Then then_of(std::vector<Stage> stages) {
  if (stages.empty()) return nullptr;
  return [stages = std::move(stages)](std::vector<Tensor> batch) {
    SerialScope serial;
    OpTimesExcluded untimed;
    for (const Stage& s : stages) {
      batch.insert(batch.end(), s.extra.begin(), s.extra.end());
      batch = s.exe->run(batch);
    }
    return batch;
  };
}

// p:push(indices [, stages]): a list of 0-based row numbers; stages (a list of {exe, extra
// tensor, ...}) run on the gathered batch before pop returns it.
int l_push(lua_State* L) {
  BatchPrefetcher& p = open_prefetcher(L);
  std::vector<int64_t> indices = row_indices(L, 2, "push");
  std::vector<Stage> stages;
  if (!lua_isnoneornil(L, 3)) stages = read_stages(L, 3);
  p.push(std::move(indices), then_of(std::move(stages)));
  return 0;
}

// p:pop() -> list of tensors (one per source), or nil when nothing is pending
int l_pop(lua_State* L) {
  BatchPrefetcher& p = open_prefetcher(L);
  std::optional<std::vector<Tensor>> batch;
  try {
    batch = p.pop();
  } catch (const std::exception& e) {  // the gathering thread's error, named for the stdlib's prefetch
    throw Error(std::string("prefetch: ") + e.what());
  }
  if (!batch) return lua_pushnil(L), 1;
  push_tensors(L, std::move(*batch));
  return 1;
}

int l_pending(lua_State* L) {
  lua_pushinteger(L, lua_Integer(open_prefetcher(L).pending()));
  return 1;
}

// p:stats() -> {batches, ready, gather_ms, map_ms (the stages' time), wait_ms}
int l_stats(lua_State* L) {
  const BatchPrefetcher::Stats s = open_prefetcher(L).stats();
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, s.batches);
  lua_setfield(L, -2, "batches");
  lua_pushinteger(L, s.ready);
  lua_setfield(L, -2, "ready");
  lua_pushnumber(L, s.gather_ms);
  lua_setfield(L, -2, "gather_ms");
  lua_pushnumber(L, s.then_ms);
  lua_setfield(L, -2, "map_ms");
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

const LuaFunction kMethods[] = {fn<l_push>("push"),   fn<l_pop>("pop"),     fn<l_pending>("pending"),
                                fn<l_stats>("stats"), fn<l_close>("close")};

}  // namespace

void register_prefetcher(lua_State* L, int core_table_index) {
  const int core = lua_absindex(L, core_table_index);
  luaL_newmetatable(L, kPrefetcherMeta);
  push_function<l_gc>(L);
  lua_setfield(L, -2, "__gc");
  push_function<l_close>(L);
  lua_setfield(L, -2, "__close");
  lua_newtable(L);
  set_functions(L, -1, kMethods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  push_function<l_new>(L);
  lua_setfield(L, core, "batch_prefetcher");
}

}  // namespace tpu
