// Multi-worker support over MPI (OpenMPI): one process per worker, each with its own simulated
// cores. The all-reduce across processes exchanges every worker's partial result point to point
// and sums them in rank order, so every worker gets bitwise the same value. Every exchange
// probes a message before receiving it (any length arrives whole, a wrong length is a clear
// error) and names the rank that does not answer, has ended its script or is at another point
// of the program, instead of hanging. MPI errors are returned, never fatal. When its script
// ends, a rank tells the others and waits for theirs, so a finished rank is not taken for a dead
// one. Built without MPI, multi_worker{} says so.
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "interpreter.h"
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

using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

int world_rank = 0, world_size = 1;
int sequence = 0;                        // tag of each all-reduce (0..29999), the same on every rank
constexpr int kAgreeTag = 30001;         // the fingerprints of a compiled step
constexpr int kEndTag = 30002;           // "my script has ended", with its exit status
constexpr int kRunning = INT_MIN;        // a peer whose end has not been announced
constexpr int kExitUnknown = -1;         // ended through exit() (os.exit) with an unknown status
std::vector<int> peer_end;               // per rank: kRunning or the status it announced
bool this_rank_ended = false;
std::vector<Bytes> abandoned;            // buffers of sends still under way when an exchange failed

double timeout_seconds() {
  const char* v = std::getenv("TPUTRAIN_MPI_TIMEOUT");
  return v && *v ? std::atof(v) : 60.0;
}

// MPI calls return their errors (MPI_ERRORS_RETURN); this turns one into a tputrain error.
void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string("multi_worker: MPI failed in ") + call + ": " + std::string(text, size_t(length)));
}

std::string rank_name(int r) { return "rank " + std::to_string(r); }

std::string ended_as(int status) {
  if (status == 0) return "finished its script";
  if (status == kExitUnknown) return "exited";
  return "stopped with an error (exit status " + std::to_string(status) + "; see its output)";
}

std::string doing(int tag) {
  if (tag == kAgreeTag) return "comparing its compiled step with the other ranks'";
  if (tag == kEndTag) return "ending its script";
  return "in an all-reduce";
}

std::string timeout_text() { return std::to_string(int(timeout_seconds())) + " s"; }

// Receives a peer's end announcement (its probe said one is waiting).
void receive_end(int r) {
  int status = 0;
  check(MPI_Recv(&status, 1, MPI_INT, r, kEndTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  peer_end[size_t(r)] = status;
}

// Receives rank r's next message if it has come; it must carry `tag` (and `expected` bytes,
// unless expected < 0). Returns whether it came.
bool try_receive(int r, int tag, long expected, const std::string& what, Bytes& into) {
  int flag = 0;
  MPI_Status st;
  check(MPI_Iprobe(r, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
  if (!flag) return false;
  if (st.MPI_TAG == kEndTag) {
    receive_end(r);
    throw Error("multi_worker: " + rank_name(r) + " " + ended_as(peer_end[size_t(r)]) + " while " +
                rank_name(world_rank) + " was " + what +
                "; every rank must run the same steps (the same epochs, steps and loop counts)");
  }
  if (st.MPI_TAG != tag) {
    throw Error("multi_worker: " + rank_name(r) + " was " + doing(st.MPI_TAG) + " while " +
                rank_name(world_rank) + " was " + what + "; every rank must run the same steps");
  }
  int count = 0;
  check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
  if (expected >= 0 && count != expected) {
    throw Error("multi_worker: " + rank_name(r) + " sent " + std::to_string(count) + " bytes while " +
                rank_name(world_rank) + " was " + what + " of " + std::to_string(expected) +
                " bytes; the ranks compiled different steps");
  }
  into.resize(size_t(count));
  check(MPI_Recv(into.data(), count, MPI_BYTE, r, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  return true;
}

// Sends `mine` to every other rank and returns every rank's part (index = rank). A part of
// another length than `expected` (when >= 0), or a rank that ends, is elsewhere in the program
// or stays silent for the timeout is an error naming it.
std::vector<Bytes> exchange(Bytes mine, int tag, long expected, const std::string& what) {
  if (mine.size() > size_t(INT_MAX)) {
    throw Error("multi_worker: " + what + " needs a message of " + std::to_string(mine.size()) +
                " bytes, more than MPI's limit of 2 GiB");
  }
  std::vector<Bytes> parts(static_cast<size_t>(world_size));
  parts[size_t(world_rank)] = std::move(mine);
  const Bytes& own = parts[size_t(world_rank)];
  std::vector<MPI_Request> sends;
  for (int r = 0; r < world_size; ++r) {
    if (r == world_rank) continue;
    sends.emplace_back();
    check(MPI_Isend(own.data(), int(own.size()), MPI_BYTE, r, tag, MPI_COMM_WORLD, &sends.back()), "MPI_Isend");
  }
  std::vector<char> got(size_t(world_size), 0);
  got[size_t(world_rank)] = 1;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_seconds());
  try {
    for (;;) {
      bool all = true;
      for (int r = 0; r < world_size; ++r) {
        if (!got[size_t(r)]) got[size_t(r)] = try_receive(r, tag, expected, what, parts[size_t(r)]);
        all = all && got[size_t(r)];
      }
      int sent = 0;
      check(MPI_Testall(int(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (all && sent) return parts;
      if (Clock::now() > deadline) {
        std::string missing;
        for (int r = 0; r < world_size; ++r)
          if (!got[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        throw Error("multi_worker: rank " + (missing.empty() ? std::string("?") : missing) + " did not answer for " +
                    timeout_text() + " while " + rank_name(world_rank) + " was " + what +
                    "; it has probably died (see its output)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  } catch (const Error&) {
    // Sends still under way keep their buffer until MPI is done with it.
    for (MPI_Request& rq : sends)
      if (rq != MPI_REQUEST_NULL) MPI_Request_free(&rq);
    abandoned.push_back(std::move(parts[size_t(world_rank)]));
    throw;
  }
}

template <class T>
void sum_in_rank_order(Tensor& out, const std::vector<Bytes>& parts) {
  T* o = out.data<T>();
  const int64_t n = out.size();
  std::memcpy(o, parts[0].data(), out.bytes());
  for (size_t r = 1; r < parts.size(); ++r) {
    const T* p = reinterpret_cast<const T*>(parts[r].data());
    for (int64_t i = 0; i < n; ++i) o[i] += p[i];
  }
}

// Sums `out` over all ranks in rank order (out holds this rank's part on entry): the same
// arithmetic on every rank.
void allreduce_in_rank_order(const Node&, Tensor& out) {
  const int tag = (sequence++) % 30000;
  const std::byte* raw = out.raw();
  std::vector<Bytes> parts = exchange(Bytes(raw, raw + out.bytes()), tag, long(out.bytes()),
                                      "in all-reduce #" + std::to_string(sequence));
  if (out.dtype() == DType::f32) sum_in_rank_order<float>(out, parts);
  else sum_in_rank_order<int32_t>(out, parts);
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Tells every other rank that this one has ended (with its exit status) and waits until they
// have too: a rank still at work learns it in its next exchange instead of waiting for a timeout.
// A rank that failed waits at most the timeout, then leaves (mpirun stops the others).
void announce_end(int status) {
  static int announced = 0;
  announced = status;
  std::vector<MPI_Request> sends(size_t(world_size), MPI_REQUEST_NULL);
  for (int r = 0; r < world_size; ++r)
    if (r != world_rank) check(MPI_Isend(&announced, 1, MPI_INT, r, kEndTag, MPI_COMM_WORLD, &sends[size_t(r)]), "MPI_Isend");
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_seconds());
  for (;;) {
    bool all = true;
    for (int r = 0; r < world_size; ++r) {
      if (r == world_rank || peer_end[size_t(r)] != kRunning) continue;
      int flag = 0;
      check(MPI_Iprobe(r, kEndTag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
      if (flag) receive_end(r);
      all = all && peer_end[size_t(r)] != kRunning;
    }
    if (all) break;
    if (status != 0 && Clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  check(MPI_Waitall(int(sends.size()), sends.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

void end_at_exit() { end_workers(kExitUnknown); }  // os.exit: the status is not known

// core.mpi_init() -> rank, size (initialises MPI once; all-reduces then span the processes).
int l_mpi_init(lua_State* L) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      raise_user_error(L, "multi_worker: MPI could not start (run the script under mpirun)");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    peer_end.assign(size_t(world_size), kRunning);
    if (world_size > 1) {
      cross_process_reduce = allreduce_in_rank_order;
      cross_process_count = world_size;
    }
    std::atexit(end_at_exit);
  }
  lua_pushinteger(L, world_rank);
  lua_pushinteger(L, world_size);
  return 2;
}

// core.mpi_allgather(s, what) -> {s of rank 0, s of rank 1, ...}: every rank's string, of any
// length; `what` says what this rank is doing, for the errors.
int l_mpi_allgather(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const std::string what = luaL_checkstring(L, 2);
  const auto* bytes = reinterpret_cast<const std::byte*>(s);
  std::vector<Bytes> parts = exchange(Bytes(bytes, bytes + n), kAgreeTag, -1, what);
  lua_createtable(L, int(parts.size()), 0);
  for (size_t r = 0; r < parts.size(); ++r) {
    lua_pushlstring(L, reinterpret_cast<const char*>(parts[r].data()), parts[r].size());
    lua_rawseti(L, -2, lua_Integer(r + 1));
  }
  return 1;
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
int l_mpi_allgather(lua_State* L) {
  luaL_checkstring(L, 1);
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  return 1;
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

const LuaFunction kFunctions[] = {fn<l_mpi_init>("mpi_init"), fn<l_mpi_allgather>("mpi_allgather"),
                                  fn<l_mpi_abort>("mpi_abort"), fn<l_mpi_available>("mpi_available")};

}  // namespace

int end_workers(int exit_status) {
#ifdef TPUTRAIN_WITH_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized || this_rank_ended) return exit_status;
  this_rank_ended = true;
  try {
    if (world_size > 1) announce_end(exit_status);
  } catch (const Error& e) {
    print_error(std::string("tputrain: ") + e.what());
  }
  finalize();
  // A job fails on every rank when one rank failed.
  for (int r = 0; r < world_size && exit_status == 0; ++r) {
    if (peer_end[size_t(r)] <= 0) continue;
    print_error("tputrain: multi_worker: " + rank_name(r) + " " + ended_as(peer_end[size_t(r)]));
    exit_status = 1;
  }
#endif
  return exit_status;
}

void register_mpi_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
