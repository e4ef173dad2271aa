"""HONEST (p14_bn_clamp_inplace_guard): the BatchNorm folded per channel exactly as ATen's inference path folds
it (alpha = w / sqrt(var + eps), beta = b - mean * alpha), the guard clamp applied out of place (the input is
read-only to a kernel), ReLU; the module's tensors held flat under names of its own (weight, bias, running_mean,
running_var).

Why the harness might reject it: the reference's state dict holds five tensors (BatchNorm's int64
`num_batches_tracked` too); this module holds the four it uses. `worker.positional_state` maps renamed tensors
only when the counts match, so the load sees five names with no place and fails (state_dict_mismatch), although
num_batches_tracked plays no part in eval-mode BatchNorm (KernelBench's seeded construction accepts this module).
Even past the load, it would meet hn22's failure.
Predicted: -1 state_dict_mismatch (false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
extern "C" void bn_clamp_relu(const float* x, const float* w, const float* b, const float* rm, const float* rv,
                              float* y, int64_t rows, int64_t c, float eps, float limit) {
    float* alpha = (float*)malloc((size_t)c * sizeof(float));
    float* beta = (float*)malloc((size_t)c * sizeof(float));
    if (!alpha || !beta) { free(alpha); free(beta); return; }
    for (int64_t j = 0; j < c; ++j) {
        const float invstd = 1.0f / sqrtf(rv[j] + eps);
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

_lib = load_c(name="bn_clamp_flat", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, c, limit):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.eps = 1e-5
        self.limit = float(limit)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.bn_clamp_relu(x, self.weight, self.bias, self.running_mean, self.running_var, y,
                           x.shape[0], x.shape[1], self.eps, self.limit)
        return y
