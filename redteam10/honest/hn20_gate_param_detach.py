"""HONEST (p13_gated_residual_param_out): y = x + sigmoid(g) * tanh(x) in C (the D gate sigmoids once per call),
and the gate returned as the reference returns it, but as a plain tensor (`self.gate.detach()`: the same
storage, so the output leaf aliases the loaded parameter exactly as the reference's does).

Why the harness might reject it: correctness is fine (the leaf is marked `alias` from the reference's own output,
exempt from the poison). But the eager baseline runs the reference's forward in a worker whose `_output` requires
`type(out) is torch.Tensor`; the reference returns its nn.Parameter, so the baseline's first warm-up round fails
with output_type, which `_Evaluation.run` raises as "the reference baseline failed" (a RuntimeError outside the
WorkerFailure handler): harness_error for every solution of this problem. (A candidate that mirrors the reference
and returns `self.gate` itself fails earlier, output_type on trial 0.)
Predicted: -1 harness_error in profiling (false positive; +1 with profile=false).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
extern "C" void gated_residual(const float* x, const float* g, float* y, int64_t rows, int64_t d) {
    float* sg = (float*)malloc((size_t)d * sizeof(float));
    if (!sg) return;
    for (int64_t j = 0; j < d; ++j) sg[j] = 1.0f / (1.0f + expf(-g[j]));
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] + sg[j] * tanhf(xr[j]);
    }
    free(sg);
}
"""

_lib = load_c(name="gated_residual", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gated_residual(x, self.gate, y, x.shape[0], x.shape[1])
        return y, self.gate.detach()
