#!/usr/bin/env bash
# Installs what tputrain needs on Debian 12 (only the packages that are missing) and builds it
# (Release) into ./build. Used by setup.sh and run_tests.sh; safe to run again.
# `--bench` also installs what bench/run.sh compares against: PyTorch and torchvision (the
# applications' counterparts), with OpenBLAS (without it PyTorch's f32 matrix products run on
# the reference BLAS, far from its best here).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# nlohmann-json3-dev: the safetensors header; python3-numpy: the independent safetensors
# reader/writer of the interchange test; lua5.4: stock Lua, which the embedding test runs the
# installed tpu module with; libjpeg62-turbo-dev, libpng-dev: the image decoders and writers;
# python3-onnx: the checker the ONNX export test runs.
packages=(build-essential cmake pkg-config liblua5.4-dev lua5.4 libeigen3-dev doctest-dev libedit-dev
          zlib1g-dev libdnnl-dev libjemalloc-dev nlohmann-json3-dev python3-numpy dataset-fashion-mnist
          libjpeg62-turbo-dev libpng-dev python3-onnx
          fortunes fortunes-de fortunes-it fortunes-es fortunes-br
          libopenmpi-dev openmpi-bin)
[[ ${1:-} == --bench ]] && packages+=(python3-torch python3-torchvision libopenblas0-pthread)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "bootstrap: run as root or install sudo" >&2; exit 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
