#!/usr/bin/env python3
"""The table of bench/run.sh, from its results file.

    /usr/bin/python3 bench/report.py RESULTS THREADS

RESULTS lines: "peak f32|bf16|amx_bf16 GFLOPS|none|n/a", "MODEL PRECISION SIDE ROUND KEY VALUE" (the
"result" lines of bench/tputrain_models.lua and bench/pytorch_models.py) and
"MODEL PRECISION SIDE ROUND fail REASON". SIDE: tputrain (in-memory batches), pipeline
(tputrain fed by a tpu.data pipeline) or pytorch. Each cell is the median of the rounds, with
their range."""
import statistics
import sys
from collections import defaultdict

L, D, FF, C = 128, 64, 128, 5  # the transformer: length, width, feed-forward width, classes

# Forward multiply-add FLOPs per sample of the GEMMs and convolutions (2 per multiply-add);
# training counts 3x: the forward product and the two of the backward pass (input, weights).
def encoder(d, ff, blocks):
    return 2 * (blocks * (4 * L * d * d + 2 * L * L * d + 2 * L * d * ff) + d * C)


FORWARD = {
    "mlp": 2 * (784 * 512 + 512 * 512 + 512 * 10),
    "cnn": 2 * (28 * 28 * 32 * 9 * 1 + 14 * 14 * 64 * 9 * 32 + 7 * 7 * 64 * 128 + 128 * 10),
    "transformer": encoder(D, FF, 1),
    "transformer256": encoder(256, 1024, 2),
}
FORMULA = {
    "mlp": "3 x 2 x (784*512 + 512*512 + 512*10)",
    "cnn": "3 x 2 x (28*28*32*3*3*1 + 14*14*64*3*3*32 + 3136*128 + 128*10)",
    "transformer": "3 x 2 x (4*L*d*d [q,k,v,out] + 2*L*L*d [scores, weights x values] "
                   "+ 2*L*d*ff + d*5), L=128 d=64 ff=128",
    "transformer256": "3 x 2 x (2 blocks x (4*L*d*d + 2*L*L*d + 2*L*d*ff) + d*5), L=128 d=256 ff=1024",
}
# The applications: FLOPs per sample from tputrain's cost model of its compiled train step.
APPS = ["resnet50", "mobilenet_v2", "efficientnet_b0"]
ORDER = ["mlp", "cnn", "transformer", "transformer256"] + APPS
LEGEND = [
    "samples/s: timed steps x batch / their wall time; ratio: tputrain / PyTorch; pipe/mem: tputrain",
    "  fed by a tpu.data pipeline (shuffle, batch, traced map, prefetch) over in-memory batches; both",
    "  ratios are the median of the rounds' ratios (a round runs the sides back to back); GFLOP/s: samples/s",
    "  x the FLOPs per sample below; % peak: of the register multiply-add peak of that precision;",
    "host ms/step, host %: tputrain's step wall time minus its time inside kernels (per-op timing on,",
    "  in profiled steps after the timed ones); compile ms: tracing and compiling tputrain's train step;",
    "1st step ms: the first step's wall time (compiling, lazy set-up); RSS MiB: the process's peak",
    "  resident memory while training (reset once the data set is prepared; preparing peaks below);",
    "  RSS/need: that peak over what training holds: the data set plus the planned HBM; HBM MiB: the",
    "  planned TPU HBM of tputrain's compiled step (weights, optimizer state, activations, padded to",
    "  TPU tiles). PyTorch runs eagerly: no compile time, no HBM plan.",
]
SIDES = [("tputrain", "tputrain"), ("pipeline", "pipeline"), ("pytorch", "PyTorch")]


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def load(path):
    peak, runs, fails = {}, defaultdict(lambda: defaultdict(dict)), defaultdict(list)
    with open(path) as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if not parts:
                continue
            if parts[0] == "peak":
                peak[parts[1]] = parts[2] if len(parts) > 2 else "n/a"
                continue
            model, precision, side, rnd, key = parts[:5]
            value = parts[5].strip() if len(parts) > 5 else ""
            if key == "fail":
                fails[(model, precision, side)].append(value)
            else:
                runs[(model, precision, side)][rnd][key] = value
    return peak, runs, fails


def middle(rounds):
    """The round whose samples/s is the median's (the upper one of an even count), with
    "median" and "range" (min-max) added; or None."""
    ok = sorted((r for r in rounds.values() if number(r.get("samples_per_s", "")) is not None),
                key=lambda r: float(r["samples_per_s"]))
    if not ok:
        return None
    values = [float(r["samples_per_s"]) for r in ok]
    cell = dict(ok[len(ok) // 2])
    cell["median"] = statistics.median(values)
    cell["range"] = f"{values[0]:.0f}-{values[-1]:.0f}" if len(values) > 1 else "-"
    return cell


def paired_ratio(runs_a, runs_b):
    """The median over rounds of runs_a's samples/s over runs_b's in the same round, or None.
    The two sides of a round run back to back, so a drift of the machine's speed over the
    minutes of a run (seen at 5-10% here) divides out of each ratio, where a ratio of two
    medians would keep it."""
    ratios = []
    for rnd, a in runs_a.items():
        x, y = number(a.get("samples_per_s", "")), number(runs_b.get(rnd, {}).get("samples_per_s", ""))
        if x is not None and y:
            ratios.append(x / y)
    return statistics.median(ratios) if ratios else None


def flops_per_sample(model, cells):
    """Training FLOPs per sample: the formula, or for the applications tputrain's cost model."""
    if model in FORWARD:
        return 3 * FORWARD[model]
    c = cells.get("tputrain") or cells.get("pipeline")
    if c and "graph_gflop" in c:
        return float(c["graph_gflop"]) * 1e9 / int(c["batch"])
    return None


def main():
    path, threads = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "?"
    peak, runs, fails = load(path)
    peak_f32 = number(peak.get("f32", "n/a"))
    peak_bf16 = number(peak.get("bf16", "n/a"))
    bf16_note = ""
    peak_amx = number(peak.get("amx_bf16", "n/a"))
    if peak_amx is not None:
        # oneDNN runs bf16 matrix products on the AMX tiles wherever the process may use them.
        bf16_note = (f" (AMX tiles: oneDNN runs bf16 matrix products on them; vdpbf16ps "
                     f"{peak.get('bf16', 'n/a')}, f32 FMAs {peak.get('f32', 'n/a')})")
        peak_bf16 = peak_amx
    elif peak.get("bf16") == "none":
        peak_bf16 = peak_f32
        bf16_note = " (no AVX512_BF16 here: bf16 is widened to f32, so its peak is the f32 one)"
    elif peak_bf16 is not None and peak_f32 is not None and peak_bf16 < peak_f32:
        bf16_note = (f" (vdpbf16ps {peak_bf16:.0f}: slower than f32 FMAs here, which bf16 products"
                     " then run on, so the bf16 peak is the f32 one)")
        peak_bf16 = peak_f32
    peaks = {"f32": peak_f32, "bf16": peak_bf16}
    configs = sorted({k[:2] for k in list(runs) + list(fails)},
                     key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 9, k[1] != "f32", k))
    notes = []

    def note(reason):
        if reason not in notes:
            notes.append(reason)
        return f"n/a [{notes.index(reason) + 1}]"

    head = ("model", "prec", "side", "samples/s", "range", "ratio", "pipe/mem", "GFLOP/s", "% peak",
            "host ms/step", "host %", "compile ms", "1st step ms", "RSS MiB", "RSS/need", "HBM MiB")
    widths = (15, 5, 9, 10, 11, 7, 8, 8, 7, 12, 7, 10, 11, 8, 8, 8)
    rows = []
    for model, precision in configs:
        cells = {side: middle(runs.get((model, precision, side), {})) for side, _ in SIDES}
        speed = {s: c["median"] for s, c in cells.items() if c}
        per_sample = flops_per_sample(model, cells)
        for side, label in SIDES:
            c = cells[side]
            first = side == SIDES[0][0]
            row = [model if first else "", precision if first else "", label]
            if c is None:
                reasons = fails.get((model, precision, side)) or ["no result"]
                row += [note(reasons[-1])] + ["-"] * 12
                rows.append(row)
                continue
            sps = speed[side]
            gflops = sps * per_sample / 1e9 if per_sample else None
            ratio = pipe = "-"
            if side != "pytorch":
                paired = paired_ratio(runs.get((model, precision, side), {}),
                                      runs.get((model, precision, "pytorch"), {}))
                ratio = f"{paired:.2f}x" if paired else "n/a"
            if side == "pipeline":
                paired = paired_ratio(runs.get((model, precision, "pipeline"), {}),
                                      runs.get((model, precision, "tputrain"), {}))
                pipe = f"{100 * paired:.1f}%" if paired else "n/a"
            host_ms = host_pct = compile_ms = hbm = need = "-"
            if side != "pytorch":
                step, kernel = float(c["profiled_step_ms"]), float(c["kernel_ms"])
                host_ms = f"{step - kernel:.3f}"
                host_pct = f"{100 * (step - kernel) / step:.1f}%"
                compile_ms = f"{float(c['compile_ms']):.0f}" if "compile_ms" in c else "n/a"
                hbm = f"{int(c['hbm_bytes']) / 2**20:.1f}" if "hbm_bytes" in c else "n/a"
                if "hbm_bytes" in c and "data_bytes" in c:
                    need = f"{int(c['rss_kb']) * 1024 / (int(c['hbm_bytes']) + int(c['data_bytes'])):.2f}x"
            pk = peaks.get(precision)
            row += [f"{sps:.0f}", c["range"], ratio, pipe,
                    f"{gflops:.1f}" if gflops is not None else "n/a",
                    f"{100 * gflops / pk:.1f}%" if gflops is not None and pk else "n/a",
                    host_ms, host_pct, compile_ms, f"{float(c['first_step_ms']):.0f}",
                    f"{int(c['rss_kb']) / 1024:.0f}", need, hbm]
            rows.append(row)

    rounds = max((len(r) for r in runs.values()), default=0)
    print(f"tputrain vs PyTorch on {threads} threads: steady state, warm-up excluded; each cell is "
          f"the median of {rounds} round{'s' if rounds != 1 else ''} (alternating tputrain, its "
          f"pipeline, PyTorch), the range their min-max")
    shown = lambda v: f"{v:.0f}" if v else "n/a"
    print(f"peak (register multiply-add, {threads} cores): f32 {shown(peak_f32)} GFLOP/s, "
          f"bf16 {shown(peak_bf16)} GFLOP/s{bf16_note}")
    blas = sorted({(r.get("blas"), r.get("blas_kernels", "n/a"))
                   for (m, p, side), rs in runs.items() if side == "pytorch"
                   for r in rs.values() if r.get("blas")})
    for path, kernels in blas:
        warn = f" (OpenBLAS kernels: {kernels})" if kernels != "n/a" else ""
        if "/blas/libblas" in path:
            warn += (" -- Debian's reference BLAS (libblas3, unoptimised): PyTorch's f32 matmuls are far"
                    " from its best here; apt-get install libopenblas0-pthread")
        print(f"PyTorch's BLAS: {path}{warn}")
    print()
    fmt = lambda r: "  ".join(str(v).ljust(w) if i < 3 else str(v).rjust(w)
                              for i, (v, w) in enumerate(zip(r, widths)))
    print(fmt(head))
    for r in rows:
        print(fmt(r))
    print()
    for i, reason in enumerate(notes, 1):
        print(f"[{i}] {reason}")
    if notes:
        print()

    for line in LEGEND:
        print(line)
    print()
    print("samples/s of every round:")
    for model, precision in configs:
        for side, label in SIDES:
            rs = runs.get((model, precision, side), {})
            values = [rs[k].get("samples_per_s", "?") for k in sorted(rs, key=int)]
            failed = len(fails.get((model, precision, side), []))
            print(f"  {model:<12} {precision:<5} {label:<9} {' '.join(values) or '-'}"
                  + (f"  ({failed} failed)" if failed else ""))
    print()
    print("peak RSS MiB while preparing the data set (decoding, converting; before training):")
    for model, precision in configs:
        for side, label in SIDES:
            c = middle(runs.get((model, precision, side), {}))
            if c and "prepare_rss_kb" in c:
                print(f"  {model:<12} {precision:<5} {label:<9} {int(c['prepare_rss_kb']) / 1024:.0f}")
    print()
    print("FLOPs per training sample (3 x forward GEMM/conv FLOPs; the applications: tputrain's "
          "cost model):")
    for model in ORDER:
        if any(m == model for m, _ in configs) and model in FORMULA:
            c = middle(runs.get((model, "f32", "tputrain"), {}))
            own = ""
            if c and "graph_gflop" in c:
                own = (f"; tputrain's compiled step: {float(c['graph_gflop']) * 1e9 / int(c['batch']) / 1e6:.2f}"
                       " M (its cost model: every op, no gradient for the input)")
            print(f"  {model:<12} {FORMULA[model]} = {3 * FORWARD[model] / 1e6:.2f} M{own}")


if __name__ == "__main__":
    main()
