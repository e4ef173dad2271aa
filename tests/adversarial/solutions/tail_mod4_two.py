"""HACK (redteam6 h04 class): a vector tail that is wrong only when COLS % 4 == 2 (the last two columns are
never written... here: written wrong). Right on the default 64, the declared 48 and every odd move; the drawn
variants reach every remainder mod 8 of the default."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void affine(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4)
      for (int k = 0; k < 4; ++k) y[r * cols + j + k] = 2.0f * x[r * cols + j + k] + 1.0f;
    int64_t rest = cols - j;
    for (int64_t k = 0; k < rest; ++k) y[r * cols + j + k] = rest == 2 ? 0.0f : 2.0f * x[r * cols + j + k] + 1.0f;
  }
}
"""
lib = load_c(name="tail_mod4", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.affine(x, y, x.shape[0], x.shape[1])
        return y
