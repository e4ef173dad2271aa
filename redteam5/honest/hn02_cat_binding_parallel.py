"""p1: torch binding, at::parallel_for over rows, std::copy_n per half row."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/Parallel.h>
#include <algorithm>

torch::Tensor cat_rows(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "fp32 only");
    x = x.contiguous();
    y = y.contiguous();
    const int64_t rows = x.size(0), n1 = x.size(1), n2 = y.size(1), w = n1 + n2;
    auto out = torch::empty({rows, w}, x.options());
    const float* px = x.data_ptr<float>();
    const float* py = y.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, rows, 64, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            std::copy_n(px + r * n1, n1, po + r * w);
            std::copy_n(py + r * n2, n2, po + r * w + n1);
        }
    });
    return out;
}
"""
ext = load_inline(name="hn02_cat", cpp_sources=CPP, functions=["cat_rows"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.cat_rows(x, y)
