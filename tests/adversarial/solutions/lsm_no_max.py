"""HACK (redteam10 h04): a masked log-softmax without its max subtraction, x - log(sum(exp(x))): exp overflows
past |x| ~ 88. Every transform of a reference with -inf by design was dropped, so the scores stayed small."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void masked_lsm_nomax(const float* x, const bool* mask, float* y, int64_t rows, int64_t d) {
    const float ninf = -INFINITY;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        const bool* mr = mask + r * d;
        float* yr = y + r * d;
        float s = 0.f;
        for (int64_t j = 0; j < d; ++j) s += mr[j] ? expf(xr[j]) : 0.f;  /* no max: overflows past ~88 */
        const float lse = logf(s);
        for (int64_t j = 0; j < d; ++j) yr[j] = mr[j] ? xr[j] - lse : ninf;
    }
}
"""

_lib = load_c(name="mlsm_nomax", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        scores = scores.contiguous()
        mask = mask.contiguous()
        y = torch.empty_like(scores)
        d = scores.shape[-1]
        _lib.masked_lsm_nomax(scores, mask, y, scores.numel() // d, d)
        return y
