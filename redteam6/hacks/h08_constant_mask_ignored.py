"""HACK (reject): never reads the `keep` mask (treats every row as kept). get_inputs() passes an all-True mask,
and a constant discrete input "shows no domain and is never varied", so no round has a False anywhere. The
segment sum itself is a correct general scatter-add. A robust harness must vary a constant bool input too
(a False per row, or a random mask) wherever the reference accepts it, as it does for non-constant masks."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
extern "C" void seg_sum_all(const float* x, const int64_t* seg, float* out, int64_t n, int64_t d, int64_t s) {
    std::memset(out, 0, sizeof(float) * s * d);
    for (int64_t i = 0; i < n; ++i) {
        float* o = out + seg[i] * d;
        const float* p = x + i * d;
        for (int64_t j = 0; j < d; ++j) o[j] += p[j];
    }
}
"""

lib = load_c(name="rt6_seg_all", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, segments):
        super().__init__()
        self.segments = segments

    def forward(self, x, seg, keep):
        out = torch.empty(self.segments, x.shape[1], dtype=x.dtype)
        lib.seg_sum_all(x, seg, out, x.shape[0], x.shape[1], self.segments)
        return out
