"""p6: the complex parameter split once into separate real/imaginary fp32 arrays (structure of arrays), cached and
keyed on the parameter's identity and version counter (load_state_dict's copy_ bumps it), then a lean C kernel
that streams the interleaved input against the split weights."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
extern "C" void crot_soa(const float* __restrict__ z, const float* __restrict__ wr, const float* __restrict__ wi,
                         float* __restrict__ p, float* __restrict__ sums, std::int64_t rows, std::int64_t n) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* zr = z + 2 * r * n;
        float* pr = p + 2 * r * n;
        double s = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
            const float a = zr[2 * j], b = zr[2 * j + 1];
            const float re = a * wr[j] - b * wi[j];
            const float im = a * wi[j] + b * wr[j];
            pr[2 * j] = re;
            pr[2 * j + 1] = im;
            s += (double)std::hypot(re, im);
        }
        sums[r] = (float)s;
    }
}
"""
lib = load_c(name="hn22_soa", source=SRC, extra_cflags=["-O3", "-ffp-contract=off", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, dtype=torch.complex64))
        self._key = None
        self._split = None

    def _weights(self):
        w = self.w.detach()
        key = (w.data_ptr(), w._version, tuple(w.shape))
        if key != self._key:
            self._split = (w.real.contiguous(), w.imag.contiguous())
            self._key = key
        return self._split

    def forward(self, z):
        z = z.contiguous()
        wr, wi = self._weights()
        p = torch.empty_like(z)
        sums = torch.empty(z.shape[0], dtype=torch.float32)
        lib.crot_soa(z, wr, wi, p, sums, z.shape[0], z.shape[1])
        return p, sums
