"""p6: complex product and magnitude sums in a C99 unit (float _Complex, cabsf), compiled as C (a .c source)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

C_SRC = r"""
#include <complex.h>
#include <math.h>
#include <stdint.h>

void crot(const float _Complex* restrict z, const float _Complex* restrict w, float _Complex* restrict p,
          float* restrict sums, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float _Complex* zr = z + r * n;
        float _Complex* pr = p + r * n;
        double s = 0.0;
        for (int64_t j = 0; j < n; ++j) {
            float a = crealf(zr[j]), b = cimagf(zr[j]), c = crealf(w[j]), d = cimagf(w[j]);
            float re = a * c - b * d, im = a * d + b * c;
            pr[j] = CMPLXF(re, im);
            s += (double)hypotf(re, im);
        }
        sums[r] = (float)s;
    }
}
"""
lib = load_c(name="hn11_cplx", sources={"crot.c": C_SRC}, extra_cflags=["-O3", "-std=c11", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, dtype=torch.complex64))

    def forward(self, z):
        z = z.contiguous()
        w = self.w.detach().contiguous()
        p = torch.empty_like(z)
        sums = torch.empty(z.shape[0], dtype=torch.float32)
        lib.crot(z, w, p, sums, z.shape[0], z.shape[1])
        return p, sums
