// Multi-worker support over MPI (OpenMPI): one process per worker, each with its own simulated
// cores. The all-reduce across processes exchanges every worker's partial result point to point
// and sums them in rank order, so every worker gets bitwise the same value, and it names the
// ranks that do not answer instead of hanging. Built without MPI, multi_worker{} says so.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "lua_internal.h"
#include "runtime/executable.h"

#ifdef TPUTRAIN_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tpu {

namespace {

#ifdef TPUTRAIN_WITH_MPI

int world_rank = 0, world_size = 1;
int sequence = 0;  // tag of each collective, the same on every rank

double timeout_seconds() {
  const char* v = std::getenv("TPUTRAIN_MPI_TIMEOUT");
  return v && *v ? std::atof(v) : 60.0;
}

// Sums `out` over all ranks in rank order (out holds this rank's part on entry).
void allreduce_in_rank_order(const Node&, Tensor& out) {
  const int tag = (sequence++) % 30000;
  const size_t bytes = out.bytes();
  std::vector<std::vector<std::byte>> parts(static_cast<size_t>(world_size));
  std::vector<MPI_Request> requests;
  parts[size_t(world_rank)].assign(out.raw(), out.raw() + bytes);
  for (int r = 0; r < world_size; ++r) {
    if (r == world_rank) continue;
    parts[size_t(r)].resize(bytes);
    MPI_Request rq;
    MPI_Irecv(parts[size_t(r)].data(), int(bytes), MPI_BYTE, r, tag, MPI_COMM_WORLD, &rq);
    requests.push_back(rq);
  }
  for (int r = 0; r < world_size; ++r) {
    if (r == world_rank) continue;
    MPI_Request rq;
    MPI_Isend(parts[size_t(world_rank)].data(), int(bytes), MPI_BYTE, r, tag, MPI_COMM_WORLD, &rq);
    requests.push_back(rq);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds());
  std::vector<int> done(requests.size(), 0);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!done[i]) MPI_Test(&requests[i], &done[i], MPI_STATUS_IGNORE);
      all = all && done[i];
    }
    if (all) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (int r = 0, k = 0; r < world_size; ++r) {
        if (r == world_rank) continue;
        if (!done[size_t(k++)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      throw Error("multi_worker: rank " + missing + " did not take part in an all-reduce for " +
                  std::to_string(int(timeout_seconds())) + " s; it has probably died (see its output)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // Sum in rank order: the same arithmetic on every rank.
  if (out.dtype() == DType::f32) {
    float* o = out.data<float>();
    const int64_t n = out.size();
    std::memcpy(o, parts[0].data(), bytes);
    for (int r = 1; r < world_size; ++r) {
      const float* p = reinterpret_cast<const float*>(parts[size_t(r)].data());
      for (int64_t i = 0; i < n; ++i) o[i] += p[i];
    }
  } else {
    int32_t* o = out.data<int32_t>();
    const int64_t n = out.size();
    std::memcpy(o, parts[0].data(), bytes);
    for (int r = 1; r < world_size; ++r) {
      const int32_t* p = reinterpret_cast<const int32_t*>(parts[size_t(r)].data());
      for (int64_t i = 0; i < n; ++i) o[i] += p[i];
    }
  }
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// core.mpi_init() -> rank, size (initialises MPI once; all-reduces then span the processes).
int l_mpi_init(lua_State* L) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size > 1) {
      cross_process_reduce = allreduce_in_rank_order;
      cross_process_count = world_size;
    }
    std::atexit(finalize);
  }
  lua_pushinteger(L, world_rank);
  lua_pushinteger(L, world_size);
  return 2;
}

// core.mpi_abort(code): ends every worker (after an error on this one).
int l_mpi_abort(lua_State* L) {
  MPI_Abort(MPI_COMM_WORLD, int(luaL_optinteger(L, 1, 1)));
  return 0;
}

#else

int l_mpi_init(lua_State* L) {
  raise_user_error(L, "multi_worker needs MPI, and this tputrain was built without it (install libopenmpi-dev and rebuild)");
}
int l_mpi_abort(lua_State*) { std::exit(1); }

#endif

int l_mpi_available(lua_State* L) {
#ifdef TPUTRAIN_WITH_MPI
  lua_pushboolean(L, 1);
#else
  lua_pushboolean(L, 0);
#endif
  return 1;
}

const luaL_Reg kFunctions[] = {{"mpi_init", l_mpi_init},
                               {"mpi_abort", l_mpi_abort},
                               {"mpi_available", l_mpi_available},
                               {nullptr, nullptr}};

}  // namespace

void register_mpi_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  luaL_setfuncs(L, kFunctions, 0);
  lua_pop(L, 1);
}

}  // namespace tpu
