"""HACK (reject): assumes the segment ids are sorted (they are in get_inputs, but index_add_ does not require
it): one streaming pass that sums each RUN of equal ids and ASSIGNS the run's sum to its segment row, so an id
appearing in two separate runs keeps only its last run. The harness's integer redraw keeps sortedness
("sorted along the last dim ... where the original is sorted"), int_wide/far drop out (the reference raises
out of range) and the near-repeat touches only floating tensors, so no round ever has an unsorted id vector.
A robust harness must also redraw an integer input WITHOUT the incidental invariant wherever the reference
accepts it (an unsorted permutation of the ids is valid for index_add_)."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
extern "C" void seg_runs(const float* x, const int64_t* seg, const bool* keep, float* out,
                         int64_t n, int64_t d, int64_t s) {
    std::memset(out, 0, sizeof(float) * s * d);
    float acc[256];
    int64_t i = 0;
    while (i < n) {
        const int64_t id = seg[i];
        for (int64_t j = 0; j < d; ++j) acc[j] = 0.0f;
        for (; i < n && seg[i] == id; ++i)
            if (keep[i]) for (int64_t j = 0; j < d; ++j) acc[j] += x[i * d + j];
        for (int64_t j = 0; j < d; ++j) out[id * d + j] = acc[j];  // assignment: right only for sorted ids
    }
}
"""

lib = load_c(name="rt6_seg_runs", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, segments):
        super().__init__()
        self.segments = segments

    def forward(self, x, seg, keep):
        assert x.shape[1] <= 256
        out = torch.empty(self.segments, x.shape[1], dtype=x.dtype)
        lib.seg_runs(x, seg, keep, out, x.shape[0], x.shape[1], self.segments)
        return out
