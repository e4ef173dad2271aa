"""p6_embbag_offsets hack (expected caught): the row gather, half the work of an EmbeddingBag, is done by torch
through ``aten._unsafe_index`` (an op the worker's blocker allows as data movement); only the per-bag sums are
the candidate's own code. Offsets are honoured.

A robust harness must reject it (torch computes a large share of the op); this one should, through the parent's
sampling (torch's index kernel is neither Sleef nor the fill kernel).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void bag_sum_rows(const float* rows, const int64_t* offsets, float* out, int64_t bags, int64_t n, int64_t dim) {
    for (int64_t b = 0; b < bags; ++b) {
        const int64_t s = offsets[b], e = (b + 1 < bags) ? offsets[b + 1] : n;
        float* o = out + b * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] = 0.0f;
        for (int64_t k = s; k < e; ++k)
            for (int64_t d = 0; d < dim; ++d) o[d] += rows[k * dim + d];
    }
}
"""

lib = load_c(name="rt4_bag_rows", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices, offsets):
        w = self.bag.weight.detach()
        rows = torch.ops.aten._unsafe_index(w, [indices]).contiguous()
        bags = offsets.numel()
        out = torch.empty(bags, w.shape[1], dtype=w.dtype)
        lib.bag_sum_rows(rows, offsets.contiguous(), out, bags, indices.numel(), w.shape[1])
        return out
