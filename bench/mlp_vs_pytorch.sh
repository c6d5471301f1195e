#!/usr/bin/env bash
# Trains the same MLP (784-512-512-10 ReLU, Adam lr 1e-3, batch 256, one epoch of Fashion-MNIST)
# with tputrain and with PyTorch, alternating (tputrain, PyTorch, tputrain, PyTorch) so both see
# the same machine load, then prints samples/s per run, the best of each and their ratio.
#
# Needs a built build/tputrain (./setup.sh) and Debian's python3-torch and python3-numpy.
# BENCH_ROUNDS=N changes the number of rounds (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=/usr/bin/python3
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "bench: PyTorch is missing; install it with: apt-get install python3-torch python3-numpy" >&2
  exit 1
fi
[[ -x build/tputrain ]] || { echo "bench: build/tputrain is missing; run ./setup.sh first" >&2; exit 1; }

source bench/pytorch_env.sh

# Runs a benchmark command, showing its output on stderr; prints its samples/s or "failed".
measure() {
  local out
  if out=$("$@" 2>&1); then
    printf '%s\n' "$out" | sed 's/^/  | /' >&2
    printf '%s\n' "$out" | sed -n 's/^samples\/s: *\([0-9.]*\).*/\1/p' | tail -n 1 | grep . || echo failed
  else
    printf '%s\n' "$out" | sed 's/^/  | /' >&2
    echo failed
  fi
}

rounds=${BENCH_ROUNDS:-2}
ours=()
theirs=()
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: tputrain" >&2
  ours+=("$(measure build/tputrain bench/mlp_tputrain.lua)")
  echo "round $r/$rounds: PyTorch" >&2
  theirs+=("$(measure "$python" bench/mlp_pytorch.py)")
done

best() { printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | tail -n 1; }
row() {
  local name=$1; shift
  printf '%-10s' "$name"
  printf ' %12s' "$@"
  printf ' %12s\n' "$(best "$@" || true)"
}

echo
printf '%-10s' "samples/s"
for ((r = 1; r <= rounds; r++)); do printf ' %12s' "run $r"; done
printf ' %12s\n' "best"
row tputrain "${ours[@]}"
row PyTorch "${theirs[@]}"
a=$(best "${ours[@]}" || true)
b=$(best "${theirs[@]}" || true)
if [[ -n $a && -n $b ]]; then
  awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio tputrain/PyTorch: %.2f\n", a / b }'
else
  echo "ratio tputrain/PyTorch: n/a (a side failed)"
fi
