"""HONEST (torch's Sleef from the candidate's own loop): exp through ATen's vector header,
``at::vec::Vectorized<float>::exp`` (which calls torch's bundled ``Sleef_expf8_u10``), eight lanes at a time in the
binding's own loop, a scalar tail through std::exp. Sleef's caller is the candidate's code: its time is runtime,
as a lean kernel's libm or libmvec is."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/cpu/vec/vec.h>
#include <cmath>

at::Tensor vec_exp(const at::Tensor& xin) {
    TORCH_CHECK(xin.scalar_type() == at::kFloat, "float32 only");
    at::Tensor x = xin.contiguous();
    at::Tensor y = at::empty_like(x);
    using Vec = at::vec::Vectorized<float>;
    const float* px = x.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int64_t n = x.numel();
    int64_t i = 0;
    for (; i + Vec::size() <= n; i += Vec::size())
        Vec::loadu(px + i).exp().store(py + i);
    for (; i < n; ++i)
        py[i] = std::exp(px[i]);
    return y;
}
"""

ext = load_inline(name="sk_sleef_vec_exp", cpp_sources=CPP, functions=["vec_exp"],
                  extra_cflags=["-O3", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.vec_exp(x)
