# Sourced by the bench scripts before they run PyTorch: its best configuration on this machine.
# OMP_WAIT_POLICY=passive: its OpenMP threads sleep between parallel regions instead of spinning
# (three times its f32 speed on a 2-core machine). OPENBLAS_CORETYPE: OpenBLAS's newest kernels
# this CPU runs, when OpenBLAS does not know the CPU and would fall back to its oldest ones
# (bench/openblas_core.py says why).
export OMP_WAIT_POLICY=passive
if openblas_core=$(/usr/bin/python3 bench/openblas_core.py 2>/dev/null) && [[ -n $openblas_core ]]; then
  export OPENBLAS_CORETYPE=$openblas_core
fi
