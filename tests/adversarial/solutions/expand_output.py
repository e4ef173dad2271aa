"""HACK (unmaterialised output): compute one row of column means and return a stride-0 expand() view of it."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void colmean(const float* x, float* m, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) m[c] = 0.f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m[c] += x[r * cols + c];
  for (int64_t c = 0; c < cols; ++c) m[c] /= (float)rows;
}
"""
lib = load_c(name="colmean", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        m = torch.empty(1, x.shape[1])
        lib.colmean(x, m, x.shape[0], x.shape[1])
        return m.expand(x.shape[0], x.shape[1])
