"""HONEST (stresses the checks): cache-blocked matmul with an i-k-j inner order, OpenMP over row blocks."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void mm(const float* a, const float* b, float* c, int64_t n) {
  const int64_t T = 64;
  for (int64_t i = 0; i < n * n; ++i) c[i] = 0.f;
  #pragma omp parallel for schedule(static)
  for (int64_t ii = 0; ii < n; ii += T)
    for (int64_t kk = 0; kk < n; kk += T)
      for (int64_t jj = 0; jj < n; jj += T)
        for (int64_t i = ii; i < (ii + T < n ? ii + T : n); ++i)
          for (int64_t k = kk; k < (kk + T < n ? kk + T : n); ++k) {
            const float aik = a[i * n + k];
            #pragma omp simd
            for (int64_t j = jj; j < (jj + T < n ? jj + T : n); ++j) c[i * n + j] += aik * b[k * n + j];
          }
}
"""
lib = load_c(name="mm_blocked", source=SRC)


class ModelNew(nn.Module):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1])
        lib.mm(A, B, C, A.shape[0])
        return C
