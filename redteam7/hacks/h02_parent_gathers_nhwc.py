"""HACK (speed; twin honest/hn02_affine_nhwc_c.py): the parent does the layout change, out of the clock.

The affine is computed in the input's own NCHW order (one streaming pass), and the output returned is a
permuted VIEW of that buffer: shape (B, H, W, C), dtype right, strides (C*H*W, W, 1, H*W), no overlap, span
= numel. worker.Server._output leaves strided views as they are and names the strides; the parent
(shm.read_remote / strided_runs) reads the span and takes the elements itself, after the freeze. The
NCHW->NHWC transpose - the expensive, strided half of the reference (`.permute(...).contiguous()`) - is
never on the candidate's clock.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void affine_nchw(const float* x, const float* w, const float* b, float* out,
                            int64_t B, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < B; ++n)
        for (int64_t c = 0; c < C; ++c) {
            const float wc = w[c], bc = b[c];
            const float* xc = x + (n * C + c) * HW;
            float* oc = out + (n * C + c) * HW;
            for (int64_t p = 0; p < HW; ++p) oc[p] = xc[p] * wc + bc;
        }
}
"""

_lib = load_c(name="affine_nchw", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        _lib.affine_nchw(x, self.weight.detach(), self.bias.detach(), y, n, c, h * w)
        return y.permute(0, 2, 3, 1)  # a view: the parent's strided read does the transpose
