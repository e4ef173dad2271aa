"""Honest (false-positive probe): the mixing written the way ATen writes elementwise kernels - a
TensorIterator (broadcasting alpha over B and L for free) driving the binding's own inner loop. All
arithmetic is in the lambda below; TensorIterator only walks strides. Expected here: forbidden_symbol
(symbols._TORCH_OK refuses at::TensorIteratorBase::for_each by name, and at::TensorIteratorConfig::build
is not in the class at all)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/TensorIterator.h>
#include <cmath>

torch::Tensor vp_mix_ti(torch::Tensor x, torch::Tensor h, torch::Tensor alpha) {
    auto a = alpha.contiguous().view({1, -1, 1});
    auto out = torch::empty_like(x);
    auto iter = at::TensorIteratorConfig()
                    .add_output(out)
                    .add_const_input(x)
                    .add_const_input(h)
                    .add_const_input(a)
                    .build();
    iter.for_each([](char** data, const int64_t* strides, int64_t n) {
        char* o = data[0];
        const char* px = data[1];
        const char* ph = data[2];
        const char* pa = data[3];
        for (int64_t i = 0; i < n; ++i) {
            const float av = *reinterpret_cast<const float*>(pa + i * strides[3]);
            const float xv = *reinterpret_cast<const float*>(px + i * strides[1]);
            const float hv = *reinterpret_cast<const float*>(ph + i * strides[2]);
            *reinterpret_cast<float*>(o + i * strides[0]) = av * xv + std::sqrt(1.0f - av * av) * hv;
        }
    });
    return out;
}
"""

_ext = load_inline(name="vp_mix_ti", cpp_sources=[CPP], functions=["vp_mix_ti"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((channels,), 0.9))

    def forward(self, x, h):
        return _ext.vp_mix_ti(x, h, self.alpha.detach())
