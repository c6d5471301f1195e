#!/usr/bin/env bash
# Time to accuracy: the README's MLP recipe trained until the Fashion-MNIST test accuracy
# reaches TARGET (default 0.88), with tputrain (bench/tta_tputrain.lua) and with PyTorch
# (bench/tta_pytorch.py), alternating, ROUNDS times each (default 5); round r seeds both sides
# with r (weights and shuffling), since how many epochs a run needs depends on its seed. Each
# time is the whole process's wall time: start-up, loading the data, compiling, training,
# evaluating after every epoch. Prints every run and the medians' ratio.
#
#   bench/time_to_accuracy.sh [TARGET [ROUNDS]]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${1:-0.88}
rounds=${2:-5}
tools/bootstrap.sh --bench >/dev/null || { echo "bench: installing or building failed" >&2; exit 1; }
export BENCH_THREADS=${BENCH_THREADS:-2} OPENBLAS_NUM_THREADS=${BENCH_THREADS:-2}
source bench/pytorch_env.sh

# run NAME COMMAND...: prints "NAME seconds epochs accuracy"
run() {
  local name=$1 t0 t1 out
  shift
  t0=$(date +%s.%N)
  out=$("$@" 2>&1 | tail -n 1)
  t1=$(date +%s.%N)
  echo "$name $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') ${out#epochs }"
}

results=$(for ((r = 1; r <= rounds; r++)); do
  run tputrain build/tputrain --threads "$BENCH_THREADS" --seed "$r" bench/tta_tputrain.lua "$target"
  run pytorch /usr/bin/python3 bench/tta_pytorch.py "$target" "$r"
done)
echo "time to test accuracy $target (whole process; seconds, epochs, accuracy):"
echo "$results" | sed 's/accuracy //' | awk '{printf "  %-9s %7.2f s  %2d epochs  %s\n", $1, $2, $3, $4}'
median() { echo "$results" | awk -v s="$1" '$1 == s {print $2}' | sort -n | awk '{v[NR] = $1} END {printf "%.2f", v[int((NR + 1) / 2)]}'; }
t=$(median tputrain)
p=$(median pytorch)
echo "median: tputrain $t s, PyTorch $p s: tputrain is $(awk -v p="$p" -v t="$t" 'BEGIN { printf "%.2f", p / t }')x faster"
