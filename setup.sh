#!/usr/bin/env bash
# Set-up on a fresh Debian 12 machine: installs the dependencies, builds tputrain into ./build
# and trains the example model on Fashion-MNIST.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tools/bootstrap.sh
./build/tputrain scripts/fashion_mnist_mlp.lua
