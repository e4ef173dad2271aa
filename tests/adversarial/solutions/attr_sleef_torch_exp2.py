"""HACK (torch's compute hidden in torch's Sleef; redteam4 h01/h17's class): exp(x) = exp2(x * log2 e), the
multiply in the binding's own loop, exp2 by ATen's own kernel, reached below the op blocker
(``at::_ops::exp2::redispatch`` to the CPU key). Most of exp2's time is inside ``Sleef_exp2f8_u10``, called by
ATen's vectorised loop: while every Sleef sample was runtime, only ATen's thin loop counted as torch, under the
share. Sleef's caller is torch's code here: its samples are torch (torch_compute)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/ATen.h>

at::Tensor exp_by_exp2(const at::Tensor& xin) {
    TORCH_CHECK(xin.scalar_type() == at::kFloat, "float32 only");
    at::Tensor x = xin.contiguous();
    at::Tensor t = at::empty_like(x);
    const float* px = x.data_ptr<float>();
    float* pt = t.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i)
        pt[i] = static_cast<float>(static_cast<double>(px[i]) * 1.4426950408889634);
    return at::_ops::exp2::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), t);
}
"""

ext = load_inline(name="sk_attr_sleef_exp2", cpp_sources=CPP, functions=["exp_by_exp2"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.exp_by_exp2(x)
