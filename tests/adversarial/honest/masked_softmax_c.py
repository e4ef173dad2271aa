"""HONEST (reads its bool mask): masked softmax, every element of every mask row read; a row with no True gives
NaN, as torch's softmax over all -inf does."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void masked_softmax(const float* s, const bool* mask, float* y, int64_t batch, int64_t L) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < L; ++i) {
      const float* r = s + (b * L + i) * L;
      const bool* k = mask + i * L;
      float* o = y + (b * L + i) * L;
      float m = -INFINITY;
      for (int64_t j = 0; j < L; ++j) if (k[j] && r[j] > m) m = r[j];
      if (m == -INFINITY) { for (int64_t j = 0; j < L; ++j) o[j] = NAN; continue; }
      double z = 0.0;
      for (int64_t j = 0; j < L; ++j) { o[j] = k[j] ? std::exp(r[j] - m) : 0.0f; z += o[j]; }
      for (int64_t j = 0; j < L; ++j) o[j] = (float)(o[j] / z);
    }
}
"""
lib = load_c(name="masked_softmax", source=SRC)


class ModelNew(nn.Module):
    def forward(self, scores, mask):
        scores, mask = scores.contiguous(), mask.contiguous()
        y = torch.empty_like(scores)
        lib.masked_softmax(scores, mask, y, scores.shape[0], scores.shape[-1])
        return y
