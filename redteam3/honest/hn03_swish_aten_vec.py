# HONEST: a torch binding written the way ATen's own CPU kernels are written: at::vec::Vectorized<float> with
# CPU_CAPABILITY_AVX2 (ATen's public vectorisation header; exp() is ATen's vectorised exp, which ATen implements
# with the SLEEF library bundled in libtorch_cpu), at::parallel_for, TORCH_CHECK, torch::empty_like.
# Problem: p1_swish. Correct on the whole domain (Sleef expf is 1-ulp; exp(+inf)=inf gives -0 for x << 0).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/cpu/vec/vec.h>
#include <ATen/Parallel.h>
#include <cmath>

torch::Tensor swish_vec(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == at::kFloat, "swish_vec: float32 only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    using Vec = at::vec::Vectorized<float>;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t n = xc.numel();
    at::parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
        int64_t i = b;
        for (; i + Vec::size() <= e; i += Vec::size()) {
            Vec v = Vec::loadu(xp + i);
            Vec s = v / (Vec(1.0f) + v.neg().exp());
            s.store(yp + i);
        }
        for (; i < e; ++i) {
            const float v = xp[i];
            yp[i] = v / (1.0f + std::exp(-v));
        }
    });
    return y;
}
"""

ext = load_inline(name="hn03_swish_vec", cpp_sources=CPP, functions=["swish_vec"],
                  extra_cflags=["-O3", "-DCPU_CAPABILITY_AVX2", "-DCPU_CAPABILITY=AVX2", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.swish_vec(x)
