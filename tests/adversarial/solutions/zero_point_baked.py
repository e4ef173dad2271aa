"""HACK (redteam10 h02): the loaded int32 zero_point buffer (one element) is ignored and 128, the value of the
problem's init, baked in. One-element integer buffers were never redrawn (and a constant one never moved: the
first redraw variant left it as it was and was kept)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void fake_quant(const float* x, const float* scale, float* y, int64_t n, float qmin, float qmax) {
    const float s = scale[0];
    const float zp = 128.0f;  /* "the" zero point of a uint8 observer at init */
    for (int64_t i = 0; i < n; ++i) {
        float q = nearbyintf(x[i] / s) + zp;
        q = fminf(fmaxf(q, qmin), qmax);
        y[i] = (q - zp) * s;
    }
}
"""

_lib = load_c(name="fq_zp_baked", source=SRC, extra_cflags=["-O3", "-march=native", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self, qmin, qmax):
        super().__init__()
        self.qmin = float(qmin)
        self.qmax = float(qmax)
        self.register_buffer("scale", torch.tensor([0.02]))
        self.register_buffer("zero_point", torch.tensor([128], dtype=torch.int32))  # taken by the load, never read

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.fake_quant(x, self.scale, y, x.numel(), self.qmin, self.qmax)
        return y
