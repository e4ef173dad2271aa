"""HACK (redteam7 h08 class, wrong but within the problem's own inputs): the temperature arrives as a Python float
in forward, and the kernel ignores it and bakes in the 0.5 every natural round passes. Python-float inputs are
moved by the harness like tensors (a scalar round), so the baked value is wrong there."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void smax(const float* x, float* y, int64_t rows, int64_t cols) {
  const float tau = 0.5f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float m = p[0];
    for (int64_t j = 1; j < cols; ++j) m = p[j] > m ? p[j] : m;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp((double)(p[j] - m) / tau);
    y[r] = m + tau * (float)std::log(s);
  }
}
"""
lib = load_c(name="smax_baked", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x, tau: float):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype)
        lib.smax(x, y, x.shape[0], x.shape[1])
        return y
