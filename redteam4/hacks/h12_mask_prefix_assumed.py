"""p7_masked_softmax hack: reads the mask, but only up to the first False of each row: it assumes every mask
row is a prefix of Trues (a length mask), as a causal mask happens to be, and skips the rest of the row.

Wrong on the domain (a mask with a hole, or a True after a False). Why it could pass: bool inputs are never
transformed, so every round's mask is the problem's own lower-triangular one.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void prefix_masked_softmax(const float* s, const bool* mask, float* y, int64_t batch, int64_t L) {
    for (int64_t i = 0; i < L; ++i) {
        int64_t len = 0;
        while (len < L && mask[i * L + len]) ++len;  // the row's valid prefix
        for (int64_t b = 0; b < batch; ++b) {
            const float* sr = s + (b * L + i) * L;
            float* yr = y + (b * L + i) * L;
            if (len == 0) { for (int64_t j = 0; j < L; ++j) yr[j] = NAN; continue; }
            float m = sr[0];
            for (int64_t j = 1; j < len; ++j) m = sr[j] > m ? sr[j] : m;
            double z = 0.0;
            for (int64_t j = 0; j < len; ++j) { yr[j] = std::exp(sr[j] - m); z += yr[j]; }
            const float inv = (float)(1.0 / z);
            for (int64_t j = 0; j < len; ++j) yr[j] *= inv;
            for (int64_t j = len; j < L; ++j) yr[j] = 0.0f;
        }
    }
}
"""

lib = load_c(name="rt4_prefix_masked_softmax", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        scores, mask = scores.contiguous(), mask.contiguous()
        y = torch.empty_like(scores)
        lib.prefix_masked_softmax(scores, mask, y, scores.shape[0], scores.shape[1])
        return y
