# HONEST: lean C++ with OpenMP (#pragma omp parallel for + omp simd reductions), weights kept in the nn.Linear
# that load_state_dict fills, row-major dot products over contiguous K, fused bias + ReLU.
# Problem: p3_linear_relu. ReLU keeps NaN (v < 0 ? 0 : v), like torch.relu.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>

extern "C" void linear_relu_f32(const float* x, const float* w, const float* b, float* y,
                                int64_t M, int64_t K, int64_t N) {
    #pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; ++m) {
        const float* xr = x + m * K;
        float* yr = y + m * N;
        for (int64_t n = 0; n < N; ++n) {
            const float* wr = w + n * K;
            float s = 0.0f;
            #pragma omp simd reduction(+:s)
            for (int64_t k = 0; k < K; ++k) s += xr[k] * wr[k];
            const float v = s + b[n];
            yr[n] = v < 0.0f ? 0.0f : v;
        }
    }
}
"""

lib = load_c(name="hn07_linear_relu", source=SRC, extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.fc.weight.detach(), self.fc.bias.detach()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty(M, N, dtype=x.dtype)
        lib.linear_relu_f32(x, w, b, y, M, K, N)
        return y
