#!/usr/bin/env python3
"""Prints the OPENBLAS_CORETYPE that gives PyTorch's f32 matmuls their fastest OpenBLAS kernels on
this CPU, or nothing when OpenBLAS already picks them (or the BLAS is not OpenBLAS).

    /usr/bin/python3 bench/openblas_core.py          # e.g. "Cooperlake"
    /usr/bin/python3 bench/openblas_core.py --why    # what it found, on stderr too

Why: Debian's OpenBLAS is built for many CPUs and picks its kernels by the CPU's model number. A
CPU newer than the library (OpenBLAS 0.3.21 on a Xeon of model 207) is not in its list, and it
falls back to its oldest x86-64 kernels ("Prescott", SSE3): PyTorch's MLP then trained 7k
samples/s there against 19-21k with the AVX-512 kernels, and the bench would have compared
tputrain with a PyTorch three times slower than its best. This names the newest kernel set the
CPU's flags can run, checked by asking OpenBLAS which set it took under that name.

The library is the one PyTorch loads: Debian's libblas.so.3 (its alternatives pick OpenBLAS).
An OPENBLAS_CORETYPE already set is kept as it is."""
import ctypes
import os
import subprocess
import sys

# Kernel sets from the oldest to the newest, with the CPU flags each needs.
KERNELS = [
    ("Prescott", set()),
    ("Nehalem", {"sse4_2"}),
    ("Sandybridge", {"avx"}),
    ("Haswell", {"avx2", "fma"}),
    ("SkylakeX", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}),
    ("Cooperlake", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"}),
]
RANK = {name.lower(): i for i, (name, _) in enumerate(KERNELS)}


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def corename(library="libblas.so.3"):
    """The kernel set OpenBLAS took in this process, or None when the BLAS is not OpenBLAS."""
    try:
        lib = ctypes.CDLL(library)
        get = lib.openblas_get_corename
    except (OSError, AttributeError):
        return None
    get.restype = ctypes.c_char_p
    return get().decode()


def corename_as(name):
    """The kernel set OpenBLAS takes with OPENBLAS_CORETYPE=name (in a child process: it reads
    the variable once, when it loads)."""
    env = dict(os.environ, OPENBLAS_CORETYPE=name)
    out = subprocess.run([sys.executable, __file__, "--corename"], env=env, capture_output=True,
                         text=True, timeout=60)
    return out.stdout.strip()


def best():
    """(the name to set or None, what was found)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None, "OPENBLAS_CORETYPE is set: " + os.environ["OPENBLAS_CORETYPE"]
    taken = corename()
    if taken is None:
        return None, "the BLAS (libblas.so.3) is not OpenBLAS"
    flags = cpu_flags()
    runnable = [name for name, needs in KERNELS if needs <= flags]
    taken_rank = RANK.get(taken.lower())
    if taken_rank is None:  # a kernel set newer than this list: OpenBLAS knows the CPU
        return None, f"OpenBLAS took {taken}"
    for name in reversed(runnable):
        if RANK[name.lower()] <= taken_rank:
            break
        if corename_as(name).lower() == name.lower():
            return name, f"OpenBLAS took {taken}; the CPU runs {name}"
    return None, f"OpenBLAS took {taken}, the best this CPU runs"


if __name__ == "__main__":
    if sys.argv[1:] == ["--corename"]:
        print(corename() or "")
        sys.exit(0)
    name, why = best()
    if "--why" in sys.argv[1:]:
        print(why, file=sys.stderr)
    if name:
        print(name)
