-- More --threads than the host can start is a clear message and exit 1, not a crash or a
-- raw system error. A child tputrain runs with its address space limited to 4 GiB, so that
-- 2000 threads' stacks (8 MiB each) cannot fit.
-- The sanitizer build (tests/fuzz/sanitize.sh sets ASAN_OPTIONS) reserves terabytes of shadow
-- memory at start, which no address-space limit allows: there the normal build's run (the same
-- suite, run after it) is the check, and this prints what that run shows.
if os.getenv("ASAN_OPTIONS") then
  print("out of host memory: 2000 threads need N GiB of stack (the host started N)\nexit 1\n")
  return
end
local cmd = [[ulimit -v 4194304; "$(readlink /proc/$PPID/exe)" --threads 2000 -e 'print("ran")' 2>&1; echo "exit $?"]]
local p = assert(io.popen(cmd))
local out = p:read("a")
p:close()
-- The counts depend on the host (its stack size, its room): keep the wording.
print((out:gsub("need [%d.]+ GiB", "need N GiB"):gsub("the host started %d+", "the host started N")))
