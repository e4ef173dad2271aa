"""HONEST (p02_qkv_affine_inplace_view; twin of h02): the whole fused buffer in place, the Q view returned.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void affine_all(float* qkv, const float* w, const float* b, int64_t t, int64_t c) {
    for (int64_t r = 0; r < t; ++r) {
        float* row = qkv + r * c;
        for (int64_t j = 0; j < c; ++j) row[j] = row[j] * w[j] + b[j];
    }
}
"""

_lib = load_c(name="affine_all", source=SRC, extra_cflags=["-O3", "-march=native", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(768))
        self.b = nn.Parameter(torch.zeros(768))

    def forward(self, qkv):
        t, c = qkv.shape
        _lib.affine_all(qkv, self.w.detach(), self.b.detach(), t, c)
        return qkv.narrow(-1, 0, c // 3)
