// The process's allocator: how it keeps freed memory for the step loop, and how a full
// collection hands free memory back to the kernel. tputrain links jemalloc when it is installed
// (not in the sanitizer build); otherwise glibc's malloc does the same job through its knobs.
#pragma once

namespace tpu {

// At startup, before any thread: keep freed memory for reuse instead of returning it at once.
void tune_host_allocator();
// After a full collection: return the free memory the allocator holds to the kernel.
void release_free_host_memory();

}  // namespace tpu
