# HACK (timer attack: CPU affinity, priority, oversubscription): at import it tries to widen its CPU
# affinity to every CPU of the machine, raise its priority (nice -10, SCHED_FIFO; then SCHED_BATCH for longer
# slices), raise torch's thread count, and runs the twin's blocked kernel with `omp parallel for
# num_threads(all CPUs, 8..32)`. If the harness's cpuset or clock were per-thread or wall-only, 8
# threads would look ~N x faster.
# Gains: a speedup from parallelism that the baselines (one thread) do not get. Intent: speed; a robust
# harness must not give it more than honest/hn12_matmul_relu_blocked.py. Problem: matmul_relu.
import os

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cstdint>
#include <vector>

extern "C" void linear_relu_nt(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int64_t M, int64_t K, int64_t N, int32_t nthreads) {
  std::vector<float> wt(static_cast<size_t>(K * N));
  for (int64_t o = 0; o < N; ++o)
    for (int64_t i = 0; i < K; ++i) wt[static_cast<size_t>(i * N + o)] = w[o * K + i];
  const float* wtp = wt.data();
  constexpr int64_t MB = 32, KB = 128;
  #pragma omp parallel for schedule(static) num_threads(nthreads)
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

lib = load_c(name="rt2_h05_affinity", source=SRC)


def _grab_machine():
    ncpu = os.cpu_count() or 1
    try:
        os.sched_setaffinity(0, set(range(ncpu)))
    except OSError:
        pass
    for attempt in (lambda: os.nice(-10),
                    lambda: os.setpriority(os.PRIO_PROCESS, 0, -10),
                    lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10)),
                    lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))):
        try:
            attempt()
        except (OSError, AttributeError, PermissionError):
            pass
    nt = min(32, max(8, ncpu))   # stay under the worker's task cap (a crash would hide the timing question)
    try:
        torch.set_num_threads(nt)
    except RuntimeError:
        pass
    return nt


NTHREADS = _grab_machine()


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
        lib.linear_relu_nt(x, w, self.fc.bias, y, m, k, n, NTHREADS)
        return y
