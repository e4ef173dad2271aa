# HONEST: cache-blocked matmul + bias + relu: W is packed as W^T into a thread_local std::vector scratch
# buffer on each call, rows in blocks of 32 and K in blocks of 128, an `omp simd` inner loop over the output
# columns, `#pragma omp parallel for` over row blocks; relu keeps NaN as torch does. Problem: matmul_relu.
# Twin of hacks/h04_gpu_offload_cpu_timer.py and hacks/h05_affinity_priority_omp.py (identical kernel).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cstdint>
#include <vector>

namespace {
thread_local std::vector<float> t_wt;   // W^T (K x N), packed per call
}

extern "C" void linear_relu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                            float* __restrict__ y, int64_t M, int64_t K, int64_t N) {
  std::vector<float>& wt = t_wt;
  wt.resize(static_cast<size_t>(K * N));
  for (int64_t o = 0; o < N; ++o)
    for (int64_t i = 0; i < K; ++i) wt[static_cast<size_t>(i * N + o)] = w[o * K + i];
  const float* wtp = wt.data();
  constexpr int64_t MB = 32, KB = 128;
  #pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < M; i0 += MB) {
    const int64_t i1 = std::min(M, i0 + MB);
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t o = 0; o < N; ++o) y[i * N + o] = b[o];
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB);
      for (int64_t i = i0; i < i1; ++i) {
        float* yr = y + i * N;
        const float* xr = x + i * K;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const float xv = xr[kk];
          const float* wr = wtp + kk * N;
          #pragma omp simd
          for (int64_t o = 0; o < N; ++o) yr[o] += xv * wr[o];
        }
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      float* yr = y + i * N;
      for (int64_t o = 0; o < N; ++o) yr[o] = yr[o] < 0.0f ? 0.0f : yr[o];
    }
  }
}
"""

lib = load_c(name="rt2_hn12_matmul_blocked", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        x = x.contiguous()
        w = self.fc.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty(m, n, dtype=x.dtype)
        lib.linear_relu(x, w, self.fc.bias, y, m, k, n)
        return y
