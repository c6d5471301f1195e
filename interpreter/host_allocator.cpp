// jemalloc keeps small objects of one size class together in slabs, where glibc interleaves
// sizes and consolidates free chunks on large requests: a deep graph's compile (hundreds of
// thousands of nodes, operand lists and fusion bodies made and freed) ran faster on jemalloc
// at thousands of layers, and grew closer to linearly with depth (bench/compile_time.lua).
#include "host_allocator.h"

#ifdef TPU_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>

// Huge pages: jemalloc leaves them to the system's mode (madvise here) and the engine marks
// its large buffers for them (engine/core/tensor.cpp). Marking every extent and jemalloc's
// metadata as well held 2 MiB pages that small objects used in part: a small model's run
// (the MLP of bench/tputrain_models.lua fed by a pipeline) was 107 MB resident instead of 88.
// A deep model's compile gained about 5% from them, no more: jemalloc keeps the pages it frees
// (below), so a compile faults only where it grows past its peak.
// dirty_decay_ms:-1: jemalloc's default hands freed pages back to the kernel over time, but a
// step loop frees and reallocates the same buffers every step, so it kept faulting (and
// zeroing) pages it had just given back: a data-pipeline map converting a 256x784 batch took
// 0.21 ms with the default, 0.03 ms without the purge (16 page faults a run, against none).
// Freed pages now stay with the process, as a TPU runtime's pool does, until a full
// collectgarbage() purges them (release_free_host_memory).
// narenas:1: jemalloc gives threads separate arenas by default, and the pages one arena keeps
// serve only its threads. A data set's prefetch thread (a new one each pass) allocates the
// batches and the step's thread frees them: with arenas apart, each pass faulted in fresh
// pages again (a map's 800 KB result took 0.19-0.39 ms a batch, against 0.05 ms with one
// arena). Small objects still come from per-thread caches, without the arena's lock.
// jemalloc reads this before the first allocation.
const char* malloc_conf = "dirty_decay_ms:-1,narenas:1";  // jemalloc's C symbol
#else
#include <malloc.h>
#endif

namespace tpu {

#ifdef TPU_HAVE_JEMALLOC

// malloc_conf above says it all: nothing more to set.
void tune_host_allocator() {}

void release_free_host_memory() {
  // Purge every arena: "arena.<MALLCTL_ARENAS_ALL>.purge".
  static_assert(MALLCTL_ARENAS_ALL == 4096);
  mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
}

#else

// A training step frees and allocates the same large buffers every time (results, batches).
// glibc would hand them back to the kernel and take fresh zeroed pages again each step (a page
// fault per 4 KiB); keeping freed memory in the heap avoids that churn. Blocks of 32 MiB and
// more (a whole data set being converted, say) still come from and go back to the kernel, or
// the temporaries of preparing the data would stay resident for the whole run.
void tune_host_allocator() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void release_free_host_memory() { malloc_trim(0); }

#endif

}  // namespace tpu
