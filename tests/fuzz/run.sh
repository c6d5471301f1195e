#!/usr/bin/env bash
# Fuzzes the file parsers with libFuzzer (clang, AddressSanitizer + UndefinedBehaviorSanitizer),
# each for a bounded time. Not part of the default test run. See tests/fuzz/README.md.
#
#   tests/fuzz/run.sh                      # every target, 600 s each
#   tests/fuzz/run.sh 120 safetensors idx  # two targets, 2 minutes each
#
# Targets: safetensors idx npy csv ir_text shapes. The build goes to $BUILD_DIR (default build-fuzz);
# each target works on a copy of its checked-in seed corpus (tests/fuzz/corpus/TARGET) in
# $BUILD_DIR/corpus/TARGET, and a crashing input lands in $BUILD_DIR/artifacts/TARGET/.
# Exits non-zero if any target found something.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

seconds=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(safetensors idx npy csv ir_text shapes)
build=${BUILD_DIR:-build-fuzz}
jobs=${JOBS:-2}
# Seconds one input may take. A shared machine short of memory can stall a process for longer
# than the default: TIMEOUT=30 there (a real hang still shows).
timeout=${TIMEOUT:-10}

# clang and its libFuzzer runtime are only needed here, so the default set-up stays lean.
missing=()
command -v clang++ >/dev/null || missing+=(clang)
compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null || missing+=(libclang-rt-14-dev)
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}"
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$build" -DTPU_FUZZ=ON -DTPU_ONEDNN=OFF -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

failed=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "fuzz: $t for ${seconds}s"
  if ! "$build/fuzz_$t" "$corpus" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
       -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" \
       >"$build/fuzz_$t.log" 2>&1; then
    failed+=("$t")
    echo "fuzz: $t FOUND A PROBLEM (log: $build/fuzz_$t.log, input: $(ls -t "$artifacts" | head -n 1))"
    grep -m 1 -A 30 -E "ERROR: |FUZZ FINDING|runtime error" "$build/fuzz_$t.log" || tail -n 30 "$build/fuzz_$t.log"
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz_$t.log" | tr '\n' ' '
    echo
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "fuzz: no findings in ${targets[*]}"
