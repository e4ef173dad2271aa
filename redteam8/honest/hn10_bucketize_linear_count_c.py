"""Honest FP probe: bucketize as a branch-free count of boundaries below each value (vectorises well for 63
boundaries). Equal to torch.bucketize for every sorted `boundaries`, which is the op's contract (torch docs:
"must contain a strictly increasing sequence, or the return value is undefined").

Predicted rejection: correctness.transform applies `negate` (and `outlier`, the near-repeat) to every floating
tensor, boundaries included; the harness keeps sortedness only for integer inputs (redraw). On descending
boundaries torch's binary search returns one undefined answer and this count another; the reference is
"well defined" there (finite, fp32 == fp64), so the round is admitted: output_mismatch on "negate inputs".
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void bucketize_count(const float* x, const float* b, int64_t* out, int64_t n, int64_t nb) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        int64_t c = 0;
        for (int64_t j = 0; j < nb; ++j) c += (b[j] < v);
        out[i] = c;
    }
}
"""

_lib = load_c(name="bucketize_count", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, boundaries):
        x, boundaries = x.contiguous(), boundaries.contiguous()
        out = torch.empty(x.shape, dtype=torch.int64)
        _lib.bucketize_count(x, boundaries, out, x.numel(), boundaries.numel())
        return out
