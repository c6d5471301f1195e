#!/usr/bin/env python3
"""Time to accuracy, PyTorch's side (bench/time_to_accuracy.sh): the same MLP recipe as
bench/tta_tputrain.lua (784-512-512-10 ReLU, Adam lr 1e-3, batch 256 without the last partial
batch, Fashion-MNIST shuffled each epoch), evaluated on the test set after every epoch until the
accuracy reaches the target (default 0.88) or 20 epochs pass. Prints "epochs N accuracy A".
Arguments: [TARGET [SEED]] (SEED default 1: the weights and the shuffle).
Threads: BENCH_THREADS (default 2)."""
import gzip
import os
import sys

import numpy as np
import torch
from torch import nn

DATA_DIR = os.environ.get("TPUTRAIN_DATA_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(name):
    with gzip.open(os.path.join(DATA_DIR, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def split(kind):
    x = torch.from_numpy(read_idx(f"{kind}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
    y = torch.from_numpy(read_idx(f"{kind}-labels-idx1-ubyte.gz").astype(np.int64))
    return x, y


def main():
    target = float(sys.argv[1]) if len(sys.argv) > 1 else 0.88
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    torch.manual_seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    x, y = split("train")
    tx, ty = split("t10k")
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    accuracy, epochs = 0.0, 0
    while accuracy < target and epochs < 20:
        model.train()
        order = torch.randperm(len(x))
        for i in range(len(x) // 256):
            idx = order[i * 256:(i + 1) * 256]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(x[idx]), y[idx]).backward()
            optimizer.step()
        epochs += 1
        model.eval()
        with torch.no_grad():
            accuracy = (model(tx).argmax(1) == ty).float().mean().item()
    print(f"epochs {epochs} accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
