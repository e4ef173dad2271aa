"""p3: RMSNorm as a torch binding using c10::BFloat16, at::parallel_for and an OpenMP simd reduction."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <cmath>

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.scalar_type() == at::kBFloat16, "x must be bf16");
    TORCH_CHECK(w.scalar_type() == at::kFloat, "w must be fp32");
    x = x.contiguous();
    w = w.contiguous();
    const int64_t rows = x.size(0), d = x.size(1);
    auto out = torch::empty_like(x);
    const c10::BFloat16* px = x.data_ptr<c10::BFloat16>();
    const float* pw = w.data_ptr<float>();
    c10::BFloat16* po = out.data_ptr<c10::BFloat16>();
    const float feps = (float)eps;
    at::parallel_for(0, rows, 16, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const c10::BFloat16* xr = px + r * d;
            double ss = 0.0;
            #pragma omp simd reduction(+:ss)
            for (int64_t j = 0; j < d; ++j) { double v = (float)xr[j]; ss += v * v; }
            const float inv = 1.0f / std::sqrt((float)(ss / (double)d) + feps);
            c10::BFloat16* o = po + r * d;
            for (int64_t j = 0; j < d; ++j) o[j] = c10::BFloat16((float)xr[j] * inv * pw[j]);
        }
    });
    return out;
}
"""
ext = load_inline(name="hn06_rms", cpp_sources=CPP, functions=["rmsnorm"], extra_cflags=["-O3", "-fopenmp-simd"])


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return ext.rmsnorm(x, self.weight.detach(), 1e-6)
