#!/usr/bin/env bash
# The pipeline against in-memory batches, each model in one process: bench/tputrain_models.lua's
# alternate feed trains one model on both feeds in turn (ABBA pairs of blocks), so the machine's
# drift, which moves separate runs by 10-25% here, hits both alike. Prints, per model, each
# feed's samples/s, the median and range of the pairs' pipeline/memory ratios, the ratio of the
# two feeds' fastest blocks, and the step's wait for the prefetch thread per batch.
#
#   bench/pipeline_vs_memory.sh                     # every model, f32: about 5 minutes
#   bench/pipeline_vs_memory.sh --models mlp,cnn --precisions f32,bf16 --pairs 20 --scale 2 --threads 2
#
# Builds build/tputrain if needed (TPUTRAIN=path picks another binary). A run longer than
# BENCH_TIMEOUT seconds (default 600) is stopped; a failed run prints its reason, and the script
# then exits with status 1.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
models=mlp,cnn,transformer,transformer256,resnet50,mobilenet_v2,efficientnet_b0
precisions=f32
pairs=10
scale=1
threads=2
while (($#)); do
  case $1 in
    --models | --precisions | --pairs | --scale | --threads)
      (($# >= 2)) || { echo "bench: $1 needs a value" >&2; usage; }
      declare "${1#--}=$2"
      shift ;;
    -h | --help) usage ;;
    *) echo "bench: unknown option '$1'" >&2; usage ;;
  esac
  shift
done
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "bench: --pairs needs a positive integer, got '$pairs'" >&2; exit 2; }
[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "bench: --scale needs a positive number, got '$scale'" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "bench: --threads needs a positive integer, got '$threads'" >&2; exit 2; }
IFS=, read -r -a model_list <<<"$models"
IFS=, read -r -a precision_list <<<"$precisions"

# Steps on each feed: about 5 seconds a feed on a 2-core machine.
declare -A steps=([mlp]=1000 [cnn]=200 [transformer]=120 [transformer256]=20 [resnet50]=20 [mobilenet_v2]=40
  [efficientnet_b0]=30)
for model in "${model_list[@]}"; do
  [[ -n ${steps[$model]:-} ]] || { echo "bench: unknown model '$model' (${!steps[*]})" >&2; exit 2; }
done
for precision in "${precision_list[@]}"; do
  [[ $precision == f32 || $precision == bf16 ]] || {
    echo "bench: unknown precision '$precision' (f32, bf16)" >&2
    exit 2
  }
done

tputrain=${TPUTRAIN:-build/tputrain}
if [[ -z ${TPUTRAIN:-} ]]; then
  tools/bootstrap.sh >/dev/null || { echo "bench: installing or building failed (tools/bootstrap.sh)" >&2; exit 1; }
fi

row() { printf '%-16s %-5s %12s %12s %9s %15s %9s %13s\n' "$@"; }
row model prec "memory s/s" "pipeline s/s" median range best "wait ms/batch"
failed=0
for model in "${model_list[@]}"; do
  for precision in "${precision_list[@]}"; do
    n=$(awk -v n="${steps[$model]}" -v s="$scale" -v p="$pairs" 'BEGIN { v = int(n * s + 0.5); print (v < p ? p : v) }')
    bf16_flag=()
    [[ $precision == bf16 ]] && bf16_flag=(--bf16)
    out=$(timeout "${BENCH_TIMEOUT:-600}" "$tputrain" --threads "$threads" "${bf16_flag[@]}" \
      bench/tputrain_models.lua "$model" "$precision" "$n" 3 1 alternate "$pairs" 2>&1)
    status=$?
    get() { sed -n "s/^result $1 //p" <<<"$out"; }
    if ((status != 0)) || [[ -z $(get pipe_mem_median) ]]; then
      reason=$(grep -v '^result ' <<<"$out" | grep -v '^[[:space:]]*$' | tail -n 1)
      reason=${reason:-no output}
      ((status == 124)) && reason="timed out after ${BENCH_TIMEOUT:-600} s (BENCH_TIMEOUT)"
      echo "$model $precision: failed (exit status $status): $reason"
      failed=1
      continue
    fi
    row "$model" "$precision" "$(get samples_per_s_memory)" "$(get samples_per_s_pipeline)" "$(get pipe_mem_median)" \
      "$(get pipe_mem_range)" "$(get pipe_mem_best)" "$(get prefetch_wait_ms)"
  done
done
echo
echo "median, range: the pairs' pipeline/memory samples/s ratios; best: the pipeline's fastest block over memory's"
exit "$failed"
