#!/usr/bin/env bash
# The benchmark of tputrain against PyTorch on this CPU, in one run: the MLP, the CNN, the
# transformer text models (d 64 and d 256) and three applications (ResNet50, MobileNetV2,
# EfficientNetB0 against torchvision's), f32 and bf16 each, same models, data, batch and thread
# count on both sides. tputrain runs each model two ways: on batches already in memory and fed
# by the tpu.data pipeline a script writes (shuffle, batch, traced map, prefetch). For every
# configuration it alternates the three, each round starting one side later (tputrain, pipeline,
# PyTorch; pipeline, PyTorch, tputrain; ...) so machine noise and the place in the round hit all,
# then prints one table of medians and ranges (bench/report.py; README explains the columns). A
# configuration that fails shows "n/a" and the reason below the table.
#
#   bench/run.sh                      # every model: about 15 minutes on a quiet 2-core machine
#   bench/run.sh --models mlp,cnn,transformer   # the short set: a few minutes
#   bench/run.sh --long               # 5x the timed and profiled steps
#   bench/run.sh --models mlp,cnn --precisions f32 --rounds 3 --scale 2 --threads 2 --feeds memory
#
# Installs what is missing (tools/bootstrap.sh --bench: Debian's python3-torch with OpenBLAS)
# and builds build/tputrain (TPUTRAIN=path picks another binary); g++ measures the peak
# (bench/fma_peak.cpp; BENCH_PEAK_F32 / BENCH_PEAK_BF16 = GFLOP/s skip it). A run longer than BENCH_TIMEOUT seconds
# (default 600) is stopped and shown as failed. Logs of every run stay in a temporary directory
# whose name the script prints.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

models=mlp,cnn,transformer,transformer256,resnet50,mobilenet_v2,efficientnet_b0
precisions=f32,bf16
feeds=memory,pipeline
rounds=3
scale=1
threads=2
usage() {
  sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while (($#)); do
  case $1 in
    --models) models=$2; shift ;;
    --precisions) precisions=$2; shift ;;
    --feeds) feeds=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --scale) scale=$2; shift ;;
    --long) scale=5 ;;
    --threads) threads=$2; shift ;;
    -h | --help) usage ;;
    *) echo "bench: unknown option '$1'" >&2; usage ;;
  esac
  shift
done

# Per model: timed steps, warm-up steps (the first compiles), profiled steps (host overhead).
# The timed steps take about a second or more: a few tenths of a second, as the short models
# had, let one stall of the machine decide a round.
declare -A timed=([mlp]=300 [cnn]=60 [transformer]=40 [transformer256]=6 [resnet50]=4 [mobilenet_v2]=8 [efficientnet_b0]=6)
declare -A warmup=([mlp]=10 [cnn]=3 [transformer]=3 [transformer256]=2 [resnet50]=2 [mobilenet_v2]=2 [efficientnet_b0]=2)
declare -A profiled=([mlp]=30 [cnn]=5 [transformer]=5 [transformer256]=2 [resnet50]=2 [mobilenet_v2]=2 [efficientnet_b0]=2)

[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "bench: --scale needs a positive number, got '$scale'" >&2; exit 2; }
# N steps times --scale, at least 1.
scaled() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s + 0.5); print (v < 1 ? 1 : v) }'; }
for model in ${models//,/ }; do
  [[ -n ${timed[$model]:-} ]] || { echo "bench: unknown model '$model' (${!timed[*]})" >&2; exit 2; }
done
for precision in ${precisions//,/ }; do
  [[ $precision == f32 || $precision == bf16 ]] || { echo "bench: unknown precision '$precision' (f32, bf16)" >&2; exit 2; }
done
for feed in ${feeds//,/ }; do
  [[ $feed == memory || $feed == pipeline ]] || { echo "bench: unknown feed '$feed' (memory, pipeline)" >&2; exit 2; }
done

tools/bootstrap.sh --bench >/dev/null || { echo "bench: installing or building failed (tools/bootstrap.sh --bench)" >&2; exit 1; }
python=/usr/bin/python3
tputrain=${TPUTRAIN:-build/tputrain}
time_limit=${BENCH_TIMEOUT:-600}  # seconds per run
logs=$(mktemp -d "${TMPDIR:-/tmp}/tputrain-bench.XXXXXX")
results=$logs/results
: >"$results"
export BENCH_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
source bench/pytorch_env.sh

torch_missing=
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  torch_missing="PyTorch is missing: apt-get install python3-torch python3-numpy"
fi

# The register multiply-add peak of $threads cores: f32, bf16 and AMX bf16 tiles (GFLOP/s, or
# "none"/"n/a").
peak() {
  if [[ -n ${BENCH_PEAK_F32:-} ]]; then
    echo "peak f32 $BENCH_PEAK_F32"
    echo "peak bf16 ${BENCH_PEAK_BF16:-n/a}"
  elif g++ -O2 -march=native -pthread bench/fma_peak.cpp -o "$logs/fma_peak" 2>"$logs/fma_peak.err"; then
    "$logs/fma_peak" "$threads" | sed 's/^/peak /'
  else
    echo "peak f32 n/a"
    echo "peak bf16 n/a"
  fi
}

# run MODEL PRECISION SIDE ROUND COMMAND...: appends "MODEL PRECISION SIDE ROUND key value"
# lines to the results, or one "... fail reason" line.
run() {
  local id="$1 $2 $3 $4" log=$logs/$1.$2.$3.$4
  shift 4
  echo "bench: $id" >&2
  timeout "$time_limit" "$@" >"$log.out" 2>"$log.err"
  local status=$?
  if ((status == 0)) && grep -q '^result samples_per_s ' "$log.out"; then
    sed -n "s/^result /$id /p" "$log.out" >>"$results"
    return
  fi
  local reason
  reason=$(grep -v '^[[:space:]]*$' "$log.err" | tail -n 1 | cut -c 1-160)
  ((status == 124)) && reason="timed out after $time_limit s (BENCH_TIMEOUT; a hang?)"
  echo "$id fail ${reason:-exit status $status, no result (see $log.err)}" >>"$results"
}

# The tputrain binary may be replaced by a rebuild for a moment: wait for it.
wait_for_tputrain() {
  for _ in $(seq 60); do
    [[ -x $tputrain ]] && return 0
    sleep 2
  done
  return 1
}

# run_side MODEL PRECISION ROUND STEPS WARMUP PROFILED SIDE: one run of one side (memory or
# pipeline: tputrain fed that way; pytorch).
run_side() {
  local model=$1 precision=$2 r=$3 steps=$4 warm=$5 prof=$6 feed=$7 bf16_flag=()
  [[ $precision == bf16 ]] && bf16_flag=(--bf16)
  if [[ $feed == pytorch ]]; then
    if [[ -n $torch_missing ]]; then
      echo "$model $precision pytorch $r fail $torch_missing" >>"$results"
    else
      run "$model" "$precision" pytorch "$r" "$python" bench/pytorch_models.py "$model" "$precision" "$steps" "$warm"
    fi
    return
  fi
  local side=tputrain
  [[ $feed == pipeline ]] && side=pipeline
  if wait_for_tputrain; then
    run "$model" "$precision" "$side" "$r" "$tputrain" --threads "$threads" "${bf16_flag[@]}" \
      bench/tputrain_models.lua "$model" "$precision" "$steps" "$warm" "$prof" "$feed"
  else
    echo "$model $precision $side $r fail $tputrain is missing: build it with ./setup.sh" >>"$results"
  fi
}

peak >>"$results"
for model in ${models//,/ }; do
  for precision in ${precisions//,/ }; do
    steps=$(scaled "${timed[$model]}") prof=$(scaled "${profiled[$model]}") warm=${warmup[$model]}
    for ((r = 1; r <= rounds; r++)); do
      # Each round starts one side later (round 1: memory, pipeline, PyTorch; round 2: pipeline,
      # PyTorch, memory; ...), so each side runs first, second and third in turn. (The cycle is
      # the same in every round: the pipeline still follows the in-memory side in two rounds of
      # three. It evens out the place in the round, not the side that ran just before.)
      sides=(${feeds//,/ } pytorch)
      for ((i = 0; i < ${#sides[@]}; i++)); do
        run_side "$model" "$precision" "$r" "$steps" "$warm" "$prof" "${sides[(i + r - 1) % ${#sides[@]}]}"
      done
    done
  done
done

echo >&2
echo "bench: logs in $logs" >&2
"$python" bench/report.py "$results" "$threads"
