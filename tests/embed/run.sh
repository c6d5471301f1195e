#!/usr/bin/env bash
# The embedding check (DESIGN section 10), run by ctest as `embed`: installs the build into a
# temporary prefix, then uses it the three ways docs/embedding.md shows: stock lua5.4 with
# tpu.so on package.cpath, a C host built with pkg-config, a CMake project with find_package.
# usage: tests/embed/run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2 here=$2/tests/embed
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
# Ends with "N passed, N failed" (the checks below), which run_tests.sh counts.
passed=0
fail() { echo "FAIL: $*"; echo "$passed passed, 1 failed"; exit 1; }
ok() { echo "ok: $*"; passed=$((passed + 1)); }
command -v lua5.4 >/dev/null || fail "lua5.4 is not installed (Debian package lua5.4; tools/bootstrap.sh installs it)"

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/tputrain lib/libtputrain.so include/tputrain.h lib/pkgconfig/tputrain.pc \
         lib/cmake/tputrain/tputrainConfig.cmake lib/lua/5.4/tpu.so; do
  [[ -e $prefix/$f ]] || fail "cmake --install did not install $f"
done
# The module takes Lua from its host: a second copy of Lua in the process breaks it.
if nm -D --defined-only "$prefix/lib/libtputrain.so" | grep -qw 'lua_newstate\|lua_pcallk'; then
  fail "libtputrain.so defines Lua's own functions"
fi
! ldd "$prefix/lib/libtputrain.so" | grep -q liblua || fail "libtputrain.so links liblua"
ok "installed; the library exports $(nm -D --defined-only "$prefix/lib/libtputrain.so" | awk '$2 == "T" {print $3}' | tr '\n' ' ')"

# Under the sanitizer build (tests/fuzz/sanitize.sh) the library needs the ASan runtime loaded
# first, which an uninstrumented host (lua5.4, the example) does only when it is preloaded.
host() { "$@"; }
if grep -q '^TPU_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  asan="$(cc -print-file-name=libasan.so) $(c++ -print-file-name=libstdc++.so)"  # ASan wraps C++ throws
  host() { LD_PRELOAD="$asan" "$@"; }
fi

# Stock Lua: the same output as the binary (so the same stdlib), errors at the script's lines.
cd "$prefix"  # neither tree's ./?.so nor ./?.lua may be what is found
unset TPUTRAIN_STDLIB
export LUA_CPATH="$prefix/lib/lua/5.4/?.so;;"
lua_out=$(host lua5.4 "$here/stock_lua.lua" 2>&1) || fail "lua5.4 stock_lua.lua: $lua_out"
bin_out=$("$prefix/bin/tputrain" "$here/stock_lua.lua" 2>&1) || fail "tputrain stock_lua.lua: $bin_out"
[[ $lua_out == "$bin_out" ]] || fail "lua5.4 and tputrain differ:"$'\n'"$lua_out"$'\n'"---"$'\n'"$bin_out"
grep -q "stock_lua.lua:13: shapes \[2\] and \[3\] cannot be broadcast together" <<<"$lua_out" ||
  fail "no file:line in the engine's error: $lua_out"
grep -q "stock_lua.lua:14: Dense" <<<"$lua_out" || fail "no file:line in the stdlib's error: $lua_out"
ok "lua5.4 and tputrain print the same:"$'\n'"$lua_out"

status=0
err=$(host lua5.4 "$here/bad.lua" 2>&1) || status=$?
((status == 1)) || fail "lua5.4 bad.lua: exit status $status, expected 1 (a Lua error): $err"
grep -q "bad.lua:4: " <<<"$err" || fail "lua5.4 bad.lua: no file:line: $err"
ok "an uncaught error under lua5.4: $(head -1 <<<"$err")"

# Inside tpu's calls subnormals flush to zero as in the binary; the host's own arithmetic keeps them.
ftz=$(host lua5.4 -e 'local tpu = require "tpu"; local tiny = 2.0 ^ -1070
                 print(tpu.tensor {1e-39}:item(), tiny / 2 > 0)') || fail "subnormal check: $ftz"
[[ $ftz == $'0.0\ttrue' ]] || fail "subnormals: expected '0.0 true' (flushed inside tpu, kept in the host), got '$ftz'"
ok "subnormals flushed inside tpu's calls only"

# A C host through pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -Wall -Wextra -Werror -o "$prefix/embed_host" "$src/examples/embed_host.c" \
   $(pkg-config --cflags --libs tputrain) -Wl,-rpath,"$prefix/lib" || fail "examples/embed_host.c does not build"
out=$(host "$prefix/embed_host" 2>&1) || fail "embed_host failed: $out"
grep -q "^error: bad.lua:2: shapes" <<<"$out" || fail "embed_host: $out"
ok "examples/embed_host.c with pkg-config:"$'\n'"$out"

# A signal after the host closed the state it caught signals for leaves other states alone.
cc -Wall -Wextra -Werror -o "$prefix/signals_after_close" "$here/signals_after_close.c" \
   $(pkg-config --cflags --libs tputrain) -Wl,-rpath,"$prefix/lib" || fail "signals_after_close.c does not build"
out=$(host "$prefix/signals_after_close" 2>&1) || fail "signals_after_close failed: $out"
[[ $out == $'sum\t5000050000' ]] || fail "signals_after_close: $out"
ok "a signal after lua_close touches no state"

# What luaopen_tpu refuses: missing Lua libraries and wrong options, each named; and
# tputrain_catch_signals(NULL) does nothing.
cc -Wall -Wextra -Werror -o "$prefix/host_checks" "$here/host_checks.c" \
   $(pkg-config --cflags --libs tputrain) -Wl,-rpath,"$prefix/lib" || fail "host_checks.c does not build"
out=$(host "$prefix/host_checks" 2>&1) || fail "host_checks failed: $out"
expected="tpu needs Lua's string library (open it with luaL_openlibs)
tpu.options.cores: expected an integer from 0 to 4096
tpu.options.cores: expected an integer from 0 to 4096
tpu.options.cores: expected an integer from 0 to 4096
tpu.options.seed: expected a non-negative integer
tpu.options.bf16: expected a boolean
tpu.options.tpu: expected \"v2\", \"v3\" or \"v4\"
tpu.options.optimize: expected a boolean
tpu.options.dump_graphs: expected a directory path (a string)
tpu.options.threads: expected an integer from 0 to 4096
tpu.options: expected a table, got a string
ok"
[[ $out == "$expected" ]] || fail "host_checks:"$'\n'"$out"$'\n'"--- expected:"$'\n'"$expected"
ok "luaopen_tpu names a missing library and each wrong option; tputrain_catch_signals(NULL) is harmless"

# A CMake project with find_package(tputrain).
cmake -S "$here/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DEXAMPLE="$src/examples/embed_host.c" >/dev/null || fail "find_package(tputrain) failed"
cmake --build "$prefix/consumer" >/dev/null || fail "the CMake consumer does not build"
out=$(host "$prefix/consumer/embed_host" 2>&1) || fail "the CMake consumer's embed_host failed: $out"
ok "find_package(tputrain) builds and runs the example"
echo "$passed passed, 0 failed"
