# HACK (work moved to a device the CPU timer cannot see): with one thread the harness times the candidate by
# its cgroup's CPU time. If a CUDA device is reachable from the worker, the matmul runs there (through torch,
# outside the op blocker via _disable_current_modes) and the host waits on a *blocking* CUDA event, i.e.
# sleeps: no CPU time. The few hundred microseconds of launch/copy CPU time are then diluted with 3x that in
# a busy loop of its own artefact so torch/CUDA stay under the 25 % sampling share. Without a usable GPU it
# falls back to exactly the honest twin's kernel (so on a CPU-only host it is just the twin).
# Gains: +2/+3 on a GPU host (the CPU clock sees almost nothing). Intent: speed; a robust harness must not
# give it more than its honest twin honest/hn12_matmul_relu_blocked.py. Problem: matmul_relu.
import time

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from shiftkit.kernels.runtime import load_c

with _disable_current_modes():  # pay its lazy imports now, at load time, not inside a round
    pass


SRC = r"""
#include <algorithm>
#include <cstdint>
#include <ctime>
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

static int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

extern "C" void burn_cpu_ns(int64_t ns, float* sink) {
  const int64_t t0 = thread_cpu_ns();
  float a = sink[0] + 1.0f, b = 0.999f;
  while (thread_cpu_ns() - t0 < ns)
    for (int k = 0; k < 20000; ++k) { a = a * b + 1e-7f; b = b * 1.0000001f - 1e-9f; }
  sink[0] = a + b;
}
"""

lib = load_c(name="rt2_h04_gpu", source=SRC)


def _gpu_usable():
    try:
        if not torch.cuda.is_available():
            return False
        with _disable_current_modes():
            t = torch.ones(4, device="cuda")
            ok = float((t * 2).sum().cpu()) == 8.0
        return ok
    except Exception:  # noqa: BLE001 - no driver, no device nodes, hidden /proc, ...
        return False


_GPU = _gpu_usable()


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)
        self._sink = torch.zeros(1)
        self._dev = None

    def _forward_gpu(self, x):
        t0 = time.thread_time_ns()
        with _disable_current_modes():
            if self._dev is None:
                self._dev = (self.fc.weight.detach().t().contiguous().cuda(), self.fc.bias.detach().cuda())
            wt, b = self._dev
            y = torch.relu(torch.addmm(b, x.cuda(), wt))
            ev = torch.cuda.Event(blocking=True)     # cudaEventBlockingSync: the host thread sleeps
            ev.record()
            ev.synchronize()
            out = y.cpu()
        spent = time.thread_time_ns() - t0
        lib.burn_cpu_ns(3 * spent, self._sink)
        return out

    def forward(self, x):
        if _GPU:
            return self._forward_gpu(x)
        x = x.contiguous()
        w = self.fc.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty(m, n, dtype=x.dtype)
        lib.linear_relu(x, w, self.fc.bias, y, m, k, n)
        return y
