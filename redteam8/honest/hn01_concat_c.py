"""Honest (twin of h01): concatenation by two memcpy calls into a fresh output."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void concat_rows(const float* a, const float* b, float* out, int64_t na, int64_t nb) {
    memcpy(out, a, (size_t)na * sizeof(float));
    memcpy(out + na, b, (size_t)nb * sizeof(float));
}
"""

_lib = load_c(name="concat_rows", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0] + b.shape[0],) + tuple(a.shape[1:]), dtype=a.dtype)
        _lib.concat_rows(a, b, out, a.numel(), b.numel())
        return out
