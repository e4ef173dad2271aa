"""HONEST (p01_clip_sgd_guard): OpenMP `parallel for simd` over restrict pointers, fminf/fmaxf clip, in place.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" {
void clip_sgd_omp(float* __restrict p, float* __restrict g, long n, float clip, float lr) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) {
        const float v = fminf(fmaxf(g[i], -clip), clip);
        g[i] = v;
        p[i] = p[i] - lr * v;
    }
}
}
"""

_lib = load_c(name="clip_sgd_omp", source=SRC, extra_cflags=["-O2", "-fopenmp", "-march=native"],
              extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, g):
        _lib.clip_sgd_omp(p, g, p.numel(), 8.0, 0.05)
        return p
