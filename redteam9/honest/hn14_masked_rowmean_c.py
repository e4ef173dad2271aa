"""HONEST (p08_masked_rowmean; twin of h08): sum and count per row, mean = sum / count in float (0/0 -> NaN,
as torch's float / int64 division gives for an empty row); the bool mask read as `const bool*`.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <stdbool.h>
extern "C" void masked_mean(const float* x, const bool* m, float* mean, int64_t* cnt, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.f;
        int64_t c = 0;
        for (int64_t j = 0; j < cols; ++j) {
            if (m[r * cols + j]) { s += x[r * cols + j]; ++c; }
        }
        cnt[r] = c;
        mean[r] = s / (float)c;
    }
}
"""

_lib = load_c(name="masked_mean", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        x, mask = x.contiguous(), mask.contiguous()
        mean = torch.empty(x.shape[0], dtype=x.dtype)
        cnt = torch.empty(x.shape[0], dtype=torch.int64)
        _lib.masked_mean(x, mask, mean, cnt, x.shape[0], x.shape[1])
        return mean, cnt
