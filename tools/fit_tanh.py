# Prints the coefficients of tanh(x) for |x| < 1 that engine/kernels/tanh_f32.h holds
# (/usr/bin/python3 tools/fit_tanh.py; python3-numpy): tanh(x) = x + x^3 P(x^2), P a
# least-squares Chebyshev fit of (tanh(x) - x) / x^3 over z = x^2 in [0, 1] at 4000 Chebyshev
# nodes, degree 7, converted to powers of z.
import math
import numpy as np
from numpy.polynomial import chebyshev

DEGREE = 7


def p_exact(z):  # (tanh(x) - x) / x^3, its series near 0
    if z < 1e-4:
        return -1 / 3 + 2 / 15 * z - 17 / 315 * z * z
    x = math.sqrt(z)
    return (math.tanh(x) - x) / (x * z)


nodes = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)  # in [-1, 1]
z = (nodes + 1) / 2                                      # in [0, 1]
fit = chebyshev.chebfit(nodes, [p_exact(v) for v in z], DEGREE)
in_t = chebyshev.cheb2poly(fit)                          # powers of t = 2 z - 1
# t = 2 z - 1: expand each power of t in powers of z.
coef = np.zeros(DEGREE + 1)
for n, c in enumerate(in_t):
    coef[: n + 1] += c * np.polynomial.polynomial.polypow([-1.0, 2.0], n)
grid = np.linspace(1e-3, 1.0, 20001)
worst = max(abs(v + v**3 * np.polyval(coef[::-1], v * v) - math.tanh(v)) / math.tanh(v) for v in grid)
print(f"// max relative error in double: {worst:.2e}")
for n, c in enumerate(coef):
    print(f"    {str(np.float32(c))}f, // z^{n}")  # the shortest digits that give the float
