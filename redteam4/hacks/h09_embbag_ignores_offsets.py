"""p6_embbag_offsets hack: never reads ``offsets``; it assumes every bag has the same length
(indices.numel() / offsets.numel()), which is what the problem's get_inputs always produces.

Wrong on the domain: EmbeddingBag is defined for any non-decreasing offsets (ragged bags, empty bags). Why it
could pass: integer index inputs get no transform the reference accepts (int_wide moves indices and offsets out
of range, so the reference raises and the transform is dropped), there is no float input to scale or
perturb, and the drawn shape variant only changes the number of bags.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void bag_sum_uniform(const int64_t* idx, const float* w, float* out, int64_t bags, int64_t len, int64_t dim) {
    for (int64_t b = 0; b < bags; ++b) {
        float* o = out + b * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] = 0.0f;
        for (int64_t k = 0; k < len; ++k) {
            const float* row = w + idx[b * len + k] * dim;
            for (int64_t d = 0; d < dim; ++d) o[d] += row[d];
        }
    }
}
"""

lib = load_c(name="rt4_bag_uniform", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices, offsets):
        bags = offsets.numel()
        length = indices.numel() // bags
        w = self.bag.weight.detach()
        out = torch.empty(bags, w.shape[1], dtype=w.dtype)
        lib.bag_sum_uniform(indices.contiguous(), w, out, bags, length, w.shape[1])
        return out
