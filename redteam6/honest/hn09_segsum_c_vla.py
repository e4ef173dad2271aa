"""HONEST (p7_segment_sum): a C99 unit (compiled as C) with variably-modified array parameters
(`const float (*x)[d]`), general scatter-add in index order, honours the keep mask. Probes: a `.c` unit,
VLA pointer parameters in DWARF (pointer to a variable-length array type), `bool` pointer."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

void seg_sum(int64_t n, int64_t d, int64_t s, const float (*x)[d], const int64_t *seg,
             const bool *keep, float (*out)[d]) {
    memset(out, 0, sizeof(float) * (size_t)(s * d));
    for (int64_t i = 0; i < n; ++i) {
        if (!keep[i]) continue;
        float *o = out[seg[i]];
        for (int64_t j = 0; j < d; ++j) o[j] += x[i][j];
    }
}
"""

lib = load_c(name="rt6_segsum_c", sources={"segsum.c": SRC}, extra_cflags=["-O2", "-std=c11"])


class ModelNew(nn.Module):
    def __init__(self, segments):
        super().__init__()
        self.segments = segments

    def forward(self, x, seg, keep):
        out = torch.empty(self.segments, x.shape[1], dtype=x.dtype)
        lib.seg_sum(x.shape[0], x.shape[1], self.segments, x, seg, keep, out)
        return out
