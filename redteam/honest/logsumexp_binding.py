# Honest (KernelBench style): a torch C++ binding built with load_inline; two passes per row (max, then the
# sum of exponentials), rows split with at::parallel_for, output allocated with torch::empty.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <cmath>
#include <limits>

torch::Tensor logsumexp_rows(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "expected a 2-D tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "expected float32");
  auto xc = x.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  auto out = torch::empty({rows, 1}, xc.options());
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = px + r * cols;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
      po[r] = m + std::log(s);
    }
  });
  return out;
}
"""

lse = load_inline(
    name="lse_ext",
    cpp_sources=cpp_source,
    functions=["logsumexp_rows"],
    extra_cflags=["-O3", "-ffast-math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return lse.logsumexp_rows(x)
