# Honest: per-row scale and shift. The wrapper pads the rows to a multiple of 8 columns so the kernel runs
# without a tail loop, then returns the unpadded view.
import torch
import torch.nn as nn
import torch.nn.functional as F
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>

extern "C" void rowscale8(const float* x, const float* s, const float* t, float* y, int64_t rows, int64_t cols8) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float sr = s[r], tr = t[r];
    const float* xr = x + r * cols8;
    float* yr = y + r * cols8;
#pragma omp simd aligned(xr, yr : 32)
    for (int64_t c = 0; c < cols8; ++c) yr[c] = xr[c] * sr + tr;
  }
}
"""

lib = load_c(name="rowscale8", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s, t):
        cols = x.shape[1]
        pad = (-cols) % 8
        xp = F.pad(x, (0, pad)) if pad else x.contiguous()
        yp = torch.empty_like(xp)
        lib.rowscale8(xp, s.contiguous(), t.contiguous(), yp, xp.shape[0], xp.shape[1])
        return yp[:, :cols]
