# HONEST: KernelBench-style torch binding (load_inline + pybind functions=[...]): TORCH_CHECKs, torch::empty
# with the input's options, data_ptr<float>(), at::parallel_for over rows, an omp-simd dot product.
# Problem: p3_linear_relu.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/Parallel.h>

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1, "linear_relu: bad ranks");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "linear_relu: float32 only");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = b.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    TORCH_CHECK(wc.size(1) == K && bc.size(0) == N, "linear_relu: shape mismatch");
    auto y = torch::empty({M, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
            for (int64_t n = 0; n < N; ++n) {
                float s = 0.0f;
                #pragma omp simd reduction(+:s)
                for (int64_t k = 0; k < K; ++k) s += xp[m * K + k] * wp[n * K + k];
                const float v = s + bp[n];
                yp[m * N + n] = v < 0.0f ? 0.0f : v;
            }
        }
    });
    return y;
}
"""

ext = load_inline(name="hn08_linear_relu", cpp_sources=CPP, functions=["linear_relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu(x, self.fc.weight.detach(), self.fc.bias.detach())
