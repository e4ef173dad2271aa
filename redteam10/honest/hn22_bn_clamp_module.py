"""HONEST (p14_bn_clamp_inplace_guard): keeps `self.bn = nn.BatchNorm1d(c)` so every reference tensor loads by
name; the same folded kernel as hn21, the clamp out of place.

Why the harness might reject it: the plan decides whether the reference writes its inputs by comparing them before
and after one call on trial 0 (`inputs_writable = not same_tensors(x1, x0)`); the guard clamp changes no value of
an N(0, 1) input, so the write goes unnoticed and every party gets the read-only input region. The candidate
passes correctness (it never writes its input), but in profiling the eager baseline's own `x.clamp_` writes the
read-only mapping: SIGSEGV, a WorkerFailure `worker_crash` recorded on the result, for every solution.
Predicted: -1 worker_crash in profiling (false positive; +1 with profile=false).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
extern "C" void bn_clamp_relu(const float* x, const float* w, const float* b, const float* rm, const float* rv,
                              float* y, int64_t rows, int64_t c, double eps, float limit) {
    float* alpha = (float*)malloc((size_t)c * sizeof(float));
    float* beta = (float*)malloc((size_t)c * sizeof(float));
    if (!alpha || !beta) { free(alpha); free(beta); return; }
    for (int64_t j = 0; j < c; ++j) {
        const float invstd = 1.0f / sqrtf(rv[j] + (float)eps);
        alpha[j] = invstd * w[j];
        beta[j] = b[j] - rm[j] * alpha[j];
    }
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * c;
        float* yr = y + r * c;
        for (int64_t j = 0; j < c; ++j) {
            const float v = fminf(fmaxf(xr[j], -limit), limit);
            const float o = v * alpha[j] + beta[j];
            yr[j] = o > 0.f ? o : 0.f;
        }
    }
    free(alpha);
    free(beta);
}
"""

_lib = load_c(name="bn_clamp_module", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, c, limit):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
        self.limit = float(limit)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        bn = self.bn
        _lib.bn_clamp_relu(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, y,
                           x.shape[0], x.shape[1], bn.eps, self.limit)
        return y
