"""HONEST (p05_scan_pair; twin of h05): two fresh contiguous outputs, inclusive scan and `inc - x` as the
reference writes it. Predicted: +1 (maybe +2)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void scan_pair(const float* x, float* inc, float* exc, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* a = inc + r * cols;
        float* b = exc + r * cols;
        float acc = 0.f;
        for (int64_t j = 0; j < cols; ++j) { acc += xr[j]; a[j] = acc; b[j] = acc - xr[j]; }
    }
}
"""

_lib = load_c(name="scan_pair", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        inc, exc = torch.empty_like(x), torch.empty_like(x)
        _lib.scan_pair(x, inc, exc, x.shape[0], x.shape[1])
        return inc, exc
