# HONEST: a torch C++ binding that registers a custom operator with TORCH_LIBRARY / TORCH_LIBRARY_IMPL
# (the CUDA-Agent style), called as torch.ops.rt2honest.gelu_bias. The C++ only uses tensor metadata,
# .contiguous(), at::empty_like and data_ptr<float>(); all arithmetic is its own loop. Problem: gelu_bias.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <cmath>
#include <cstdint>

at::Tensor rt2_gelu_bias(const at::Tensor& x_in, const at::Tensor& b_in) {
  TORCH_CHECK(x_in.dim() == 2, "x must be 2-D");
  TORCH_CHECK(x_in.scalar_type() == at::kFloat && b_in.scalar_type() == at::kFloat, "float32 expected");
  TORCH_CHECK(b_in.numel() == x_in.size(1), "bias length must match the last dim");
  at::Tensor x = x_in.contiguous();
  at::Tensor b = b_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* xp = x.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float v = xp[i * cols + j] + bp[j];
      yp[i * cols + j] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752440f));
    }
  }
  return y;
}

TORCH_LIBRARY(rt2honest, m) {
  m.def("gelu_bias(Tensor x, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(rt2honest, CPU, m) {
  m.impl("gelu_bias", &rt2_gelu_bias);
}
"""

load_inline(name="rt2_hn04_gelu_lib", cpp_sources=CPP, extra_cflags=["-O3"], is_python_module=False, verbose=False)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return torch.ops.rt2honest.gelu_bias(x, self.bias)
