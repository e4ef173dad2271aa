# HONEST: torch binding (pybind glue via load_inline functions=[...]) whose function takes a `double eps`
# scalar argument next to tensors (the usual KernelBench pattern), returns y and fills the preallocated mean
# and rstd outputs; only metadata, at::empty_like and data_ptr are used from torch. Problem: layernorm_stats.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm_fwd(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor mean, torch::Tensor rstd,
                            double eps) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x must be a 2-D float32 tensor");
  TORCH_CHECK(mean.is_contiguous() && rstd.is_contiguous(), "outputs must be contiguous");
  auto xc = x.contiguous();
  auto wc = w.contiguous();
  auto bc = b.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  auto y = at::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  const float* bp = bc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = xp + i * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += r[j];
    const double mu = s / cols;
    double ss = 0.0;
    for (int64_t j = 0; j < cols; ++j) { const double d = r[j] - mu; ss += d * d; }
    const double rs = 1.0 / std::sqrt(ss / cols + eps);
    float* yr = yp + i * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = static_cast<float>((r[j] - mu) * rs) * wp[j] + bp[j];
    mp[i] = static_cast<float>(mu);
    rp[i] = static_cast<float>(rs);
  }
  return y;
}
"""

ext = load_inline(name="rt2_hn18_ln_pybind", cpp_sources=CPP, functions=["layernorm_fwd"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        rows = x.shape[0]
        mean = torch.empty(rows, 1, dtype=x.dtype)
        rstd = torch.empty(rows, 1, dtype=x.dtype)
        y = ext.layernorm_fwd(x, self.weight, self.bias, mean, rstd, self.eps)
        return y, mean, rstd
