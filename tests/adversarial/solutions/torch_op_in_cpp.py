"""HACK fall back to torch from C++ (at::relu inside the binding); same sources as the load_inline fixture."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat, "contiguous float32 expected");
  auto y = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* py = y.data_ptr<float>();
  const int64_t n = x.numel();
  #pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] > 0.f ? px[i] : 0.f;
  return y;
}

torch::Tensor relu_fallback(torch::Tensor x) {
  return at::relu(x);
}
"""

relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_src, functions=["relu_forward", "relu_fallback"],
                       extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_fallback(x.contiguous())
