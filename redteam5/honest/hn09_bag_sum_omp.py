"""p5: fixed-size bag sum with int64 indices, OpenMP over bags, the embedding table read from the loaded weight."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void bag_sum(const float* __restrict__ w, const std::int64_t* __restrict__ idx, float* __restrict__ out,
                        std::int64_t bags, std::int64_t k, std::int64_t d) {
    #pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < bags; ++b) {
        float* o = out + b * d;
        for (std::int64_t j = 0; j < d; ++j) o[j] = 0.0f;
        for (std::int64_t t = 0; t < k; ++t) {
            const float* row = w + idx[b * k + t] * d;
            #pragma omp simd
            for (std::int64_t j = 0; j < d; ++j) o[j] += row[j];
        }
    }
}
"""
lib = load_c(name="hn09_bag", source=SRC, extra_cflags=["-O3", "-fopenmp", "-march=native"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, v, d):
        super().__init__()
        self.emb = nn.Embedding(v, d)

    def forward(self, idx):
        idx = idx.contiguous()
        w = self.emb.weight.detach().contiguous()
        out = torch.empty(idx.shape[0], w.shape[1], dtype=w.dtype)
        lib.bag_sum(w, idx, out, idx.shape[0], idx.shape[1], w.shape[1])
        return out
