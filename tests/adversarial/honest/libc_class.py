"""HONEST (libc as a library): a tuning knob read from the environment (``getenv``, ``strtoul``), the CPUs this
process may use (``sched_getaffinity``), a POSIX thread pool (``pthread_create``/``pthread_join``) and a
``qsort`` of the work items: every name is libc's, none was on the old name list."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstdlib>
#include <pthread.h>
#include <sched.h>

namespace {
struct Job { const float* x; const float* w; const float* b; float* y; std::int64_t r0, r1, cols; };

void* run(void* p) {
  const Job* j = static_cast<const Job*>(p);
  for (std::int64_t r = j->r0; r < j->r1; ++r)
    for (std::int64_t c = 0; c < j->cols; ++c) {
      float v = j->x[r * j->cols + c] * j->w[c] + j->b[c];
      j->y[r * j->cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
  return nullptr;
}

int by_start(const void* a, const void* b) {
  std::int64_t x = static_cast<const Job*>(a)->r0, y = static_cast<const Job*>(b)->r0;
  return (x > y) - (x < y);
}

int workers() {
  const char* s = std::getenv("SSC_THREADS");  // an optional knob; unset in the harness
  unsigned long n = s ? std::strtoul(s, nullptr, 10) : 0;
  if (n == 0) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  }
  return n < 1 ? 1 : (n > 8 ? 8 : int(n));
}
}  // namespace

extern "C" void ssc(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t cols) {
  const int n = workers();
  Job jobs[8];
  pthread_t tids[8];
  const std::int64_t step = (rows + n - 1) / n;
  int k = 0;
  for (int t = n - 1; t >= 0; --t)  // made in reverse, sorted back: the order must not matter
    if (t * step < rows) jobs[k++] = Job{x, w, b, y, t * step, (t + 1) * step < rows ? (t + 1) * step : rows, cols};
  std::qsort(jobs, k, sizeof(Job), by_start);
  for (int t = 1; t < k; ++t) pthread_create(&tids[t], nullptr, run, &jobs[t]);
  run(&jobs[0]);
  for (int t = 1; t < k; ++t) pthread_join(tids[t], nullptr);
}
"""
lib = load_c(name="ssc_libc", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
