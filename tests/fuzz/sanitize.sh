#!/usr/bin/env bash
# Builds tputrain with AddressSanitizer + UndefinedBehaviorSanitizer and runs the whole test
# suite (unit, Lua, golden) with it. Slower than the normal build; not part of the default run.
#
#   tests/fuzz/sanitize.sh            # build into build-asan, run ctest
#   BUILD_DIR=/tmp/asan tests/fuzz/sanitize.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${BUILD_DIR:-build-asan}
jobs=${JOBS:-2}

cmake -S . -B "$build" -DTPU_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs"
# Leaks are not failures here (Lua states live to exit); every other report aborts the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" --output-on-failure --timeout 3600
