"""HONEST (the CPython C API under pybind's glue): a torch binding whose function takes Python floats and a
Python int next to tensors (the clamp bounds and a row block), so the glue converts them with the C API
(``PyFloat_AsDouble``, ``PyNumber_Float``, ``PyLong_AsLong``...); only metadata, ``empty_like`` and
``data_ptr`` come from torch."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
torch::Tensor ssc_scalars(torch::Tensor x, torch::Tensor w, torch::Tensor b, double lo, double hi, int64_t block) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat, "2-D float32 expected");
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t rows = xc.size(0), cols = xc.size(1), blk = block > 0 ? block : 1;
  const float *px = xc.data_ptr<float>(), *pw = wc.data_ptr<float>(), *pb = bc.data_ptr<float>();
  float* py = y.data_ptr<float>();
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  for (int64_t r0 = 0; r0 < rows; r0 += blk)
    for (int64_t r = r0; r < rows && r < r0 + blk; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float v = px[r * cols + c] * pw[c] + pb[c];
        py[r * cols + c] = v < flo ? flo : (v > fhi ? fhi : v);
      }
  return y;
}
"""
ext = load_inline(name="ssc_pybind_scalars", cpp_sources=CPP, functions=["ssc_scalars"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))
        self.lo, self.hi, self.block = -1.0, 1.0, 16

    def forward(self, x):
        return ext.ssc_scalars(x, self.weight, self.bias, self.lo, self.hi, self.block)
