"""p7_masked_softmax honest: reads the boolean mask for every element; a row with no allowed element is NaN
everywhere, as torch's softmax of an all -inf row is."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void masked_softmax(const float* s, const bool* mask, float* y, int64_t batch, int64_t L) {
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < L; ++i) {
            const float* sr = s + (b * L + i) * L;
            const bool* mr = mask + i * L;
            float* yr = y + (b * L + i) * L;
            float m = -INFINITY;
            bool any = false;
            for (int64_t j = 0; j < L; ++j)
                if (mr[j]) { any = true; m = sr[j] > m ? sr[j] : m; }
            if (!any) { for (int64_t j = 0; j < L; ++j) yr[j] = NAN; continue; }
            double z = 0.0;
            for (int64_t j = 0; j < L; ++j) {
                const float e = mr[j] ? std::exp(sr[j] - m) : 0.0f;
                yr[j] = e;
                z += e;
            }
            const float inv = (float)(1.0 / z);
            for (int64_t j = 0; j < L; ++j) yr[j] *= inv;
        }
}
"""

lib = load_c(name="rt4_masked_softmax", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        scores, mask = scores.contiguous(), mask.contiguous()
        y = torch.empty_like(scores)
        lib.masked_softmax(scores, mask, y, scores.shape[0], scores.shape[1])
        return y
