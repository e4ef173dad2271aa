"""Honest (redteam9 hn01, problem inplace_affine): an out-of-place kernel for a reference that works in place.

As written by redteam9:
HONEST (p01_inplace_affine; twin of h01): the affine computed out of place into a fresh output, the normal
way to write a kernel (the input is read-only in the sandbox, as documented).

Why the harness might reject it: evaluate.py computes each round's expected output by running the in-place
reference on the round's own input tensors (`_to` returns them uncopied) before `Worker.round` writes them
into the input region, so the region holds x*w+b already and this kernel computes (x*w+b)*w+b:
output_mismatch on trial 0. (If it passed correctness, the eager baseline would still crash in profiling.)
Predicted: -1 (false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void affine_rows(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t c) {
    for (int64_t i = 0; i < n; ++i) {
        const float* xr = x + i * c;
        float* yr = y + i * c;
        for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] * w[j] + b[j];
    }
}
"""

_lib = load_c(name="affine_rows", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(c))
        self.bias = nn.Parameter(torch.empty(c))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.affine_rows(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
