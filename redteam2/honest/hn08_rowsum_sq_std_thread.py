# HONEST: std::thread + std::vector<std::thread> to split the rows (at most 4 threads; the chunks of any
# thread that fails to start are done by the caller, exceptions never leave the kernel), a lambda worker,
# double accumulation. No extra build flags (glibc >= 2.34 needs no -pthread). Problem: rowsum_sq.
import os

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

extern "C" void rowsum_sq_threads(const float* x, float* out, int64_t rows, int64_t cols, int64_t nthreads) {
  auto work = [=](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* p = x + i * cols;
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t j = 0;
      for (; j + 4 <= cols; j += 4) {
        a0 += double(p[j]) * p[j];
        a1 += double(p[j + 1]) * p[j + 1];
        a2 += double(p[j + 2]) * p[j + 2];
        a3 += double(p[j + 3]) * p[j + 3];
      }
      for (; j < cols; ++j) a0 += double(p[j]) * p[j];
      out[i] = static_cast<float>((a0 + a1) + (a2 + a3));
    }
  };
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(nthreads, rows));
  const int64_t chunk = (rows + nt - 1) / nt;
  std::vector<std::thread> pool;
  std::vector<char> started(static_cast<size_t>(nt), 0);
  for (int64_t t = 1; t < nt; ++t) {
    const int64_t r0 = t * chunk, r1 = std::min(rows, r0 + chunk);
    if (r0 >= r1) { started[t] = 1; continue; }
    try {
      pool.emplace_back(work, r0, r1);
      started[t] = 1;
    } catch (...) {
      // could not start a thread: its rows are done below by this thread
    }
  }
  work(0, std::min(rows, chunk));
  for (int64_t t = 1; t < nt; ++t)
    if (!started[t]) work(t * chunk, std::min(rows, t * chunk + chunk));
  for (auto& th : pool) th.join();
}
"""

lib = load_c(name="rt2_hn08_rowsum_threads", source=SRC)
NTHREADS = max(1, min(4, os.cpu_count() or 1))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        lib.rowsum_sq_threads(x, out, x.shape[0], x.shape[1], NTHREADS)
        return out
