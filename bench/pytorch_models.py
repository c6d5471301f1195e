#!/usr/bin/env python3
"""The PyTorch side of bench/run.sh: the models of bench/tputrain_models.lua on the CPU, trained
the same way (Adam lr 1e-3, same batch, in-memory data cycled in file order), printing its
measurements as "result KEY VALUE" lines.

    /usr/bin/python3 bench/pytorch_models.py MODEL PRECISION [STEPS [WARMUP]]

MODEL: mlp, cnn, transformer, transformer256 (see bench/tputrain_models.lua), or resnet50,
mobilenet_v2, efficientnet_b0 (torchvision's, 10 classes, on 512 random 64x64 RGB images in
NCHW, batch 64; Debian's python3-torchvision); PRECISION: f32, or bf16 with
torch.autocast("cpu", dtype=torch.bfloat16) around the forward pass and the loss (weights and
optimizer stay f32, as in tputrain's mixed_bfloat16 policy). Threads: BENCH_THREADS (default 2);
bench/run.sh also sets OMP_WAIT_POLICY=passive and, where OpenBLAS does not know the CPU,
OPENBLAS_CORETYPE (bench/pytorch_env.sh): PyTorch's best configuration on this machine.
Needs Debian's python3-torch and python3-numpy."""
import gc
import gzip
import os
import sys
import time

import numpy as np
import torch
from torch import nn

import openblas_core  # bench/openblas_core.py: the kernel set OpenBLAS took

DATA_DIR = os.environ.get("TPUTRAIN_DATA_DIR", "/usr/share/datasets/fashion-mnist")
LENGTH, VOCAB, CLASSES = 128, 128, 5


def result(key, value):
    print(f"result {key} {value}", flush=True)


def read_idx(path):
    """An IDX file (gzip) as a uint8 array of its shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist(shape):
    """The training split as f32 in [0, 1] of `shape` and int64 labels, in file order."""
    images = read_idx(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA_DIR, "train-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.reshape(shape).astype(np.float32) / 255)
    return x, torch.from_numpy(labels.astype(np.int64))


class TextClassifier(nn.Module):
    """Embedding and learned positions, `blocks` post-norm encoder blocks, mean over the
    sequence. PyTorch's block has one dropout more than tputrain's (after the feed-forward
    activation)."""

    def __init__(self, dim, ff, blocks):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, dim)
        self.position = nn.Parameter(torch.randn(LENGTH, dim) * 0.05)
        self.encoders = nn.Sequential(*[nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=ff,
                                                                   dropout=0.1, batch_first=True)
                                        for _ in range(blocks)])
        self.logits = nn.Linear(dim, CLASSES)

    def forward(self, ids):
        h = self.encoders(self.embedding(ids) + self.position)
        return self.logits(h.mean(1))


def tokens(n):
    return torch.randint(0, VOCAB, (n, LENGTH)), torch.randint(0, CLASSES, (n,))


def setup(name):
    """model, batch size, x, y"""
    if name == "mlp":
        x, y = fashion_mnist((-1, 784))
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                             nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10)), 256, x, y
    if name == "cnn":
        x, y = fashion_mnist((-1, 1, 28, 28))
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(),
                             nn.Linear(7 * 7 * 64, 128), nn.ReLU(),
                             nn.Linear(128, 10)), 128, x, y
    if name == "transformer":
        x, y = tokens(64 * 32)
        return TextClassifier(64, 128, 1), 64, x, y
    if name == "transformer256":
        x, y = tokens(32 * 32)
        return TextClassifier(256, 1024, 2), 32, x, y
    if name in ("resnet50", "mobilenet_v2", "efficientnet_b0"):
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=10)
        x = torch.randint(0, 256, (512, 3, 64, 64), dtype=torch.uint8).float() / 255
        return model, 64, x, torch.randint(0, 10, (512,))
    raise SystemExit(f"model must be mlp, cnn, transformer, transformer256, resnet50, mobilenet_v2 "
                     f"or efficientnet_b0, got {name!r}")


def blas_library():
    """The file of the BLAS that PyTorch's f32 matmuls call (Debian's alternatives pick it)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if any(name in os.path.basename(path) for name in ("libblas", "openblas", "blis", "mkl_rt")):
                return os.path.realpath(path)
    return "unknown"


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def main():
    name, precision = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "f32"
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    if precision not in ("f32", "bf16"):
        raise SystemExit(f"precision must be f32 or bf16, got {precision!r}")
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    torch.manual_seed(1)
    model, batch, x, y = setup(name)
    # Training's peak from here on, as on the tputrain side: data preparation is done.
    gc.collect()
    result("prepare_rss_kb", peak_rss_kb())
    reset_peak_rss()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    batches = len(x) // batch
    autocast = precision == "bf16"

    def step(i):
        j = i % batches
        xb, yb = x[j * batch:(j + 1) * batch], y[j * batch:(j + 1) * batch]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss

    t0 = time.perf_counter()
    step(0)
    first = time.perf_counter() - t0
    for i in range(1, warmup):
        step(i)
    start = time.perf_counter()
    for i in range(steps):
        loss = step(warmup + i)
    seconds = time.perf_counter() - start
    if not torch.isfinite(loss):
        raise SystemExit(f"the loss is {loss.item()} after {warmup + steps} steps")

    result("batch", batch)
    result("steps", steps)
    result("samples_per_s", f"{steps * batch / seconds:.1f}")
    result("step_ms", f"{seconds * 1000 / steps:.3f}")
    result("first_step_ms", f"{first * 1000:.1f}")
    result("rss_kb", peak_rss_kb())
    result("blas", blas_library())
    result("blas_kernels", openblas_core.corename(blas_library()) or "n/a")


if __name__ == "__main__":
    main()
