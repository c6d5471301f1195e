"""The export test (ctest `export`): exports the models of models.lua, checks each file with the
onnx checker (full_check) and compares the numpy evaluator's outputs (evaluate.py) with
model:predict's on the same random input.

Tolerance: an output passes when max |onnx - predict| <= 1e-5 * max(1, max |predict|): an
absolute 1e-5 for outputs of magnitude up to 1 (probabilities, normalized features), relative to
the largest output beyond that.

    /usr/bin/python3 tests/export/run.py build/tputrain [model... | all]

Without names it checks every model of models.lua but the large applications (ResNet50,
Xception, VGG16, AlexNet: tens of millions of weights), which "all" adds.

Ends with the line "N passed, N failed" (run_tests.sh counts it).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evaluate import evaluate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1e-5
DTYPES = {"F32": np.float32, "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        lo, hi = spec["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=DTYPES[spec["dtype"]]).reshape(spec["shape"])
    return out


def check(directory, name):
    """Checker and comparison of one model; returns (ok, line)."""
    model = onnx.load(os.path.join(directory, name + ".onnx"))
    onnx.checker.check_model(model, full_check=True)
    saved = read_safetensors(os.path.join(directory, name + ".safetensors"))
    inputs = [i.name for i in model.graph.input]
    feeds = {n: saved["input_%d" % (i + 1)] for i, n in enumerate(inputs)}
    got = evaluate(model, feeds)
    worst, scale, ok = 0.0, 0.0, True
    for i, y in enumerate(got):
        want = saved["output_%d" % (i + 1)].astype(np.float64)
        if y.shape != want.shape:  # a wrong shape is a failure, not a broadcast
            return False, "%s: output %d has shape %s, model:predict's %s" % (name, i + 1, y.shape, want.shape)
        err, size = float(np.abs(y - want).max()), float(np.abs(want).max())
        ok = ok and err <= TOLERANCE * max(1.0, size)
        worst, scale = max(worst, err), max(scale, size)
    nodes = len(model.graph.node)
    return ok, "%s: checker ok, %d nodes, max abs error %.2e (outputs up to %.3g)" % (name, nodes, worst, scale)


def main():
    tputrain, wanted = sys.argv[1], sys.argv[2:]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as directory:
        run = subprocess.run([tputrain, os.path.join(HERE, "models.lua"), directory] + wanted,
                             capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            sys.stdout.write(run.stderr)
            failed += 1
        names = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("exported ")]
        for name in names:
            try:
                ok, line = check(directory, name)
            except Exception as e:  # the checker's or the evaluator's error fails this model only
                ok, line = False, "%s: %s: %s" % (name, type(e).__name__, e)
            print(("ok    " if ok else "FAIL  ") + line)
            passed, failed = passed + ok, failed + (not ok)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
