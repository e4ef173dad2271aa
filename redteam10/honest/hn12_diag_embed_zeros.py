"""HONEST (p07_diag_embed): the output is allocated with `torch.zeros` every call (allocation with its
initialisation: the blocker allows it, the attribution counts torch's fill kernel as runtime), and a lean kernel
writes the diagonals.
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void write_diagonals(const float* x, float* y, int64_t b, int64_t n) {
    for (int64_t k = 0; k < b; ++k) {
        float* yk = y + k * n * n;
        const float* xk = x + k * n;
        for (int64_t i = 0; i < n; ++i) yk[i * (n + 1)] = xk[i];
    }
}
"""

_lib = load_c(name="write_diagonals", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, n = x.shape
        y = torch.zeros(b, n, n)
        _lib.write_diagonals(x, y, b, n)
        return y
