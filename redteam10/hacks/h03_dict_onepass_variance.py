"""HACK (p03_dict_batch_layernorm; twin hn05): LayerNorm with the one-pass variance E[x^2] - E[x]^2 in float32,
the textbook catastrophic-cancellation shortcut (one read of the row for both statistics).

Mechanism: every input transform is written for lists and tuples only. `correctness.transform` (negate, scale_up,
scale_down, scale_tiny, sparse, int_wide, shift, ties, outlier), `perturb` (the near-repeat) and `keep_sorted`
return a dict input unchanged (their `tr` recurses into list/tuple and returns anything else as it is), and
`evaluate._double` does not convert tensors inside a dict either. So the `shift` round that catches
`onepass_variance` (x + 32 rms) is run on the untransformed inputs: every transform round (and every spot round)
repeats trial 0. On the problem's own N(0, 1) rows the one-pass variance is accurate to ~1e-6.
Intent: reject (docs list `onepass_variance` as caught by `shift`). Predicted: +1, maybe +2 (NOT caught).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void ln_onepass(const float* x, const float* w, const float* b, float* y,
                           int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        float s = 0.f, ss = 0.f;
        for (int64_t j = 0; j < d; ++j) {
            const float v = xr[j];
            s += v;
            ss += v * v;
        }
        const float mean = s / (float)d;
        const float var = ss / (float)d - mean * mean;  /* one pass: cancels when |mean| >> std */
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
}
"""

_lib = load_c(name="ln_onepass", source=SRC, extra_cflags=["-O3", "-march=native", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = float(eps)

    def forward(self, batch):
        x = batch["x"].contiguous()
        y = torch.empty_like(x)
        d = x.shape[-1]
        _lib.ln_onepass(x, self.weight, self.bias, y, x.numel() // d, d, self.eps)
        return y
