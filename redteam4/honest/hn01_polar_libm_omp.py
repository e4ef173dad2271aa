"""p1_polar honest: plain C++ over libm's hypotf/atan2f (correct for every float, signed zeros included), with an
OpenMP loop (one thread in the harness; libgomp is part of the runtime)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void polar(const float* x, const float* y, float* r, float* t, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        r[i] = std::hypot(x[i], y[i]);
        t[i] = std::atan2(y[i], x[i]);
    }
}
"""

lib = load_c(name="rt4_polar_libm", source=SRC, extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        r = torch.empty_like(x)
        t = torch.empty_like(x)
        lib.polar(x, y, r, t, x.numel())
        return r, t
