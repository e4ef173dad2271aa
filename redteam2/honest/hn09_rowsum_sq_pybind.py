# HONEST: KernelBench-style torch C++ binding (load_inline with functions=[...], pybind glue) that only
# uses tensor metadata, .contiguous(), at::empty and data_ptr<float>(), with at::parallel_for (the
# harness's own baseline binding uses it) around its own double-accumulating loop. Problem: rowsum_sq.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor rowsum_sq(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "x must be 2-D");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
  auto xc = x.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  auto out = at::empty({rows}, xc.options());
  const float* xp = xc.data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* p = xp + i * cols;
      double s = 0.0;
      for (int64_t j = 0; j < cols; ++j) s += double(p[j]) * double(p[j]);
      op[i] = static_cast<float>(s);
    }
  });
  return out;
}
"""

ext = load_inline(name="rt2_hn09_rowsum_pybind", cpp_sources=CPP, functions=["rowsum_sq"], extra_cflags=["-O3"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.rowsum_sq(x)
