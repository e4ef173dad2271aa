# Honest: row sums with a small std::thread pool (each thread owns a block of rows; 4-way unrolled accumulators).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

static void sum_block(const float* x, float* out, int64_t r0, int64_t r1, int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) { a0 += xr[c]; a1 += xr[c + 1]; a2 += xr[c + 2]; a3 += xr[c + 3]; }
    for (; c < cols; ++c) a0 += xr[c];
    out[r] = (a0 + a1) + (a2 + a3);
  }
}

extern "C" void row_sums(const float* x, float* out, int64_t rows, int64_t cols) {
  unsigned hw = std::thread::hardware_concurrency();
  int64_t nthreads = std::max<int64_t>(1, std::min<int64_t>(hw ? hw : 1, rows / 64));
  if (nthreads == 1) { sum_block(x, out, 0, rows, cols); return; }
  std::vector<std::thread> pool;
  const int64_t per = (rows + nthreads - 1) / nthreads;
  for (int64_t t = 0; t < nthreads; ++t) {
    const int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(sum_block, x, out, r0, r1, cols);
  }
  for (auto& th : pool) th.join();
}
"""

ext = load_c(name="rowsum_threads", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        ext.row_sums(x, out, x.shape[0], x.shape[1])
        return out
