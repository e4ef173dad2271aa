"""HONEST (p02_fakequant_int_zero_point): the two buffers are read as Python numbers in forward (`float(...)`,
`int(...)`: an `.item()`, which the op blocker allows as metadata) and passed to the kernel by value, with the
bounds as int32 arguments; the output is allocated with `torch.empty_like`.
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void fake_quant_s(const float* x, float* y, int64_t n, float s, int32_t zp, int32_t qmin, int32_t qmax) {
    const float z = (float)zp, lo = (float)qmin, hi = (float)qmax;
    for (int64_t i = 0; i < n; ++i) {
        float q = nearbyintf(x[i] / s) + z;
        q = q < lo ? lo : (q > hi ? hi : q);
        y[i] = (q - z) * s;
    }
}
"""

_lib = load_c(name="fake_quant_s", source=SRC, extra_cflags=["-O2", "-march=native", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self, qmin, qmax):
        super().__init__()
        self.qmin = int(qmin)
        self.qmax = int(qmax)
        self.register_buffer("scale", torch.tensor([0.02]))
        self.register_buffer("zero_point", torch.tensor([128], dtype=torch.int32))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.fake_quant_s(x, y, x.numel(), float(self.scale), int(self.zero_point), self.qmin, self.qmax)
        return y
