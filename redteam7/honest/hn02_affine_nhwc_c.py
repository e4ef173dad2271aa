"""Honest (twin of h02): per-channel affine written straight into the NHWC output (the layout change is
done by the kernel, inside the timed call)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void affine_nhwc(const float* x, const float* w, const float* b, float* out,
                            int64_t B, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < B; ++n) {
        const float* xn = x + n * C * HW;
        float* on = out + n * C * HW;
        for (int64_t p0 = 0; p0 < HW; p0 += 64) {          // 64 pixels x all channels per tile
            const int64_t p1 = p0 + 64 < HW ? p0 + 64 : HW;
            for (int64_t c = 0; c < C; ++c) {
                const float wc = w[c], bc = b[c];
                const float* xc = xn + c * HW;
                for (int64_t p = p0; p < p1; ++p) on[p * C + c] = xc[p] * wc + bc;
            }
        }
    }
}
"""

_lib = load_c(name="affine_nhwc", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        out = torch.empty(n, h, w, c, dtype=x.dtype)
        _lib.affine_nhwc(x, self.weight.detach(), self.bias.detach(), out, n, c, h * w)
        return out
