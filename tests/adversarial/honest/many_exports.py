"""HONEST (a library with thousands of exports): the kernel sits next to 9,000 small extern "C" helpers made
by macros. Every export gets a prototype, and the prototypes reach the worker whatever their size (they once
travelled in one fixed-size message to the zygote: EMSGSIZE, a harness error)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
#define H1(n) extern "C" float many_exports_helper_function_##n(const float* a, int64_t i) { return a[i] * (float)(n##0 % 7); }
#define H10(n) H1(n##0) H1(n##1) H1(n##2) H1(n##3) H1(n##4) H1(n##5) H1(n##6) H1(n##7) H1(n##8) H1(n##9)
#define H100(n) H10(n##0) H10(n##1) H10(n##2) H10(n##3) H10(n##4) H10(n##5) H10(n##6) H10(n##7) H10(n##8) H10(n##9)
#define H1000(n) H100(n##0) H100(n##1) H100(n##2) H100(n##3) H100(n##4) H100(n##5) H100(n##6) H100(n##7) H100(n##8) H100(n##9)
H1000(1) H1000(2) H1000(3) H1000(4) H1000(5) H1000(6) H1000(7) H1000(8) H1000(9)
"""
lib = load_c(name="many_exports", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
