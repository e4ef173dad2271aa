# HONEST (control twin of hacks/h13_bursty_median.py): the same vectorisable swish kernel as h13 plus the same
# total amount of extra work per call, spread evenly (every call spins W = 2 x the kernel's own calibrated time,
# e.g. a bookkeeping step). Correct outputs; deliberately costlier than hn01. Expected: +1 (not faster than eager).
# Problem: p1_swish.
import time

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <time.h>

extern "C" void swish_fm(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

extern "C" void spin_ns(int64_t ns) {
    const int64_t t0 = now_ns();
    volatile double acc = 0.0;
    while (now_ns() - t0 < ns) {
        for (int k = 0; k < 64; ++k) acc = acc * 0.999 + 1.0;
    }
}
"""

lib = load_c(name="burst_swish", source=SRC, extra_cflags=["-O3", "-ffast-math"])


def _calibrate() -> int:
    x = torch.randn(64, 2048)
    y = torch.empty_like(x)
    for _ in range(5):
        lib.swish_fm(x, y, x.numel())
    t0 = time.thread_time_ns()
    for _ in range(40):
        lib.swish_fm(x, y, x.numel())
    return max(1000, (time.thread_time_ns() - t0) // 40)


W_NS = 2 * _calibrate()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.swish_fm(x, y, x.numel())
        lib.spin_ns(W_NS)
        return y
