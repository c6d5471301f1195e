# Prints the coefficients of erf(x) on [1, 4] as a polynomial in u = x - 2.5 that
# engine/kernels/erf_f32.h holds (/usr/bin/python3 tools/fit_erf.py; python3-numpy): a
# least-squares Chebyshev fit at 4000 Chebyshev nodes, degree 16, converted to powers of u.
import math
import numpy as np
from numpy.polynomial import chebyshev

LO, HI, DEGREE = 1.0, 4.0, 16
nodes = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)  # in [-1, 1]
x = nodes * (HI - LO) / 2 + (HI + LO) / 2
fit = chebyshev.chebfit(nodes, [math.erf(v) for v in x], DEGREE)
in_t = chebyshev.cheb2poly(fit)                     # powers of t = u / 1.5
in_u = [c / 1.5 ** n for n, c in enumerate(in_t)]   # powers of u
grid = np.linspace(LO, HI, 30001)
worst = max(abs(np.polyval(in_u[::-1], v - 2.5) - math.erf(v)) for v in grid)
print(f"// max |error| in double: {worst:.2e}")
for n, c in enumerate(in_u):
    print(f"    {str(np.float32(c))}f, // u^{n}")  # the shortest digits that give the float
