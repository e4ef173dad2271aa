"""HONEST (a Python-float leaf as accurate as the reference's, in another summation order): bfloat16 widened to
float32, squares summed in float32 row by row (sequentially, not torch's order) and the rows in double."""
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" double meansq_rows(const uint16_t* x, int64_t n, int64_t cols) {
  double total = 0.0;
  for (int64_t s = 0; s < n; s += cols) {
    float part = 0.f;
    for (int64_t i = s; i < s + cols && i < n; ++i) {
      uint32_t bits = (uint32_t)x[i] << 16;
      float f;
      memcpy(&f, &bits, 4);
      part += f * f;
    }
    total += part;
  }
  return n ? total / (double)n : 0.0;
}
"""
lib = load_c(name="meansq_leaf_fp32", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        return float(lib.meansq_rows(x, x.numel(), x.shape[-1] if x.dim() else 1))
