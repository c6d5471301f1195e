#!/usr/bin/env python3
"""The benchmark MLP with PyTorch on the CPU: 784-512-512-10 (ReLU), Adam lr 1e-3, batch 256,
one epoch of Fashion-MNIST (234 full batches, after a short warm-up; loading and preparing the
data is not timed). Prints "samples/s: N" on its last line.

Needs Debian's python3-torch and python3-numpy. Run through bench/mlp_vs_pytorch.sh, which sets
OMP_WAIT_POLICY=passive and OPENBLAS_CORETYPE where needed (bench/pytorch_env.sh); 2 threads is PyTorch's best configuration on the 2-core test machine
(override with BENCH_TORCH_THREADS)."""
import gzip
import os
import time

import numpy as np
import torch
from torch import nn

DATA_DIR = os.environ.get("TPUTRAIN_DATA_DIR", "/usr/share/datasets/fashion-mnist")
BATCH = 256
WARMUP_STEPS = 10


def read_idx(path):
    """An IDX file (gzip) as a uint8 array of its shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train():
    images = read_idx(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA_DIR, "train-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def main():
    torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "2")))
    torch.manual_seed(1)
    x, y = load_train()  # in file order on both sides: the order does not change the work

    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                          nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()

    for i in range(WARMUP_STEPS):
        step(i)
    steps = len(x) // BATCH
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    seconds = time.perf_counter() - start
    print(f"epoch: {steps} steps in {seconds:.2f} s")
    print(f"samples/s: {steps * BATCH / seconds:.0f}")


if __name__ == "__main__":
    main()
