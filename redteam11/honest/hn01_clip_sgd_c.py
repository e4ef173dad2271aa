"""HONEST (p01_clip_sgd_guard; twin of h01): fused in-place clip + step, the clipped g written back, p returned.
Predicted: +1 (maybe +2)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void clip_sgd(float* __restrict p, float* __restrict g, int64_t n, float clip, float lr) {
    for (int64_t i = 0; i < n; ++i) {
        float v = g[i];
        v = v > clip ? clip : (v < -clip ? -clip : v);
        g[i] = v;
        p[i] -= lr * v;
    }
}
"""

_lib = load_c(name="clip_sgd", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, g):
        _lib.clip_sgd(p, g, p.numel(), 8.0, 0.05)
        return p
