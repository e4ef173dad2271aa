"""HONEST (p04_masked_log_softmax): a torch binding (load_inline) that allocates its output with
torch::empty_like, checks dtypes with TORCH_CHECK, reads the bool mask through data_ptr<bool>() and splits rows
with at::parallel_for; the row sum is accumulated in double.
Predicted: +1 (a torch-binding build; its allocation glue is a small share of the samples).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <limits>

torch::Tensor masked_log_softmax(torch::Tensor scores, torch::Tensor mask) {
  TORCH_CHECK(scores.scalar_type() == at::kFloat, "scores must be float32");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "mask must be bool");
  auto x = scores.contiguous();
  auto m = mask.contiguous();
  auto out = torch::empty_like(x);
  const int64_t d = x.size(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  const float* xp = x.data_ptr<float>();
  const bool* mp = m.data_ptr<bool>();
  float* op = out.data_ptr<float>();
  const float ninf = -std::numeric_limits<float>::infinity();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * d;
      const bool* mr = mp + r * d;
      float* yr = op + r * d;
      float mx = ninf;
      for (int64_t j = 0; j < d; ++j)
        if (mr[j] && xr[j] > mx) mx = xr[j];
      if (mx == ninf) {
        for (int64_t j = 0; j < d; ++j) yr[j] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      double s = 0.0;
      for (int64_t j = 0; j < d; ++j)
        if (mr[j]) s += std::exp((double)(xr[j] - mx));
      const float ls = (float)std::log(s);
      for (int64_t j = 0; j < d; ++j) yr[j] = mr[j] ? (xr[j] - mx) - ls : ninf;
    }
  });
  return out;
}
"""

_ext = load_inline(name="masked_lsm_ext", cpp_sources=CPP, functions=["masked_log_softmax"],
                   extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        return _ext.masked_log_softmax(scores, mask)
