# HACK (zeros left to untouched pages, read outside the clock): every call maps a fresh anonymous region with
# an inline-asm mmap syscall (no mmap import for the symbol allowlist), writes only the alpha * x part (one
# page per 32 KB output row) and returns a tensor over that region; the other ~88 % of the pages are never
# touched, so they cost nothing inside the timed window - whoever reads the output afterwards (the parent,
# outside the clock) gets the kernel's shared zero page. The previous call's region is unmapped with another
# raw syscall at the start of the next call. Same arithmetic as the twin.
# Gains: most of the output's write cost leaves the timed window. Intent: speed; a robust harness must not
# give it more than honest/hn21_pad_scale.py. Problem: pad_scale.
import ctypes

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
static long rt2_sys6(long nr, long a, long b, long c, long d, long e, long f) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#endif

// maps a fresh zero-filled region for rows x (cols + pad) floats, writes alpha * x into the first cols of each row
extern "C" void lazy_pad_scale(const float* x, int64_t rows, int64_t cols, int64_t pad, float alpha, int64_t* addr_out) {
  const int64_t out_cols = cols + pad;
  const int64_t bytes = rows * out_cols * static_cast<int64_t>(sizeof(float));
  float* y = nullptr;
#if defined(__x86_64__) && defined(__linux__)
  const long r = rt2_sys6(9 /* mmap */, 0, bytes, 3 /* PROT_READ|PROT_WRITE */, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
  if (r < 0 && r > -4096) { *addr_out = 0; return; }
  y = reinterpret_cast<float*>(r);
#else
  *addr_out = 0;
  return;
#endif
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * out_cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * alpha;
  }
  *addr_out = reinterpret_cast<int64_t>(y);
}

extern "C" void lazy_release(int64_t addr, int64_t bytes) {
#if defined(__x86_64__) && defined(__linux__)
  if (addr) rt2_sys6(11 /* munmap */, addr, bytes, 0, 0, 0, 0);
#endif
}

extern "C" void pad_scale_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t pad, float alpha) {
  const int64_t out_cols = cols + pad;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) y[i * out_cols + j] = x[i * cols + j] * alpha;
    std::memset(y + i * out_cols + cols, 0, static_cast<size_t>(pad) * sizeof(float));
  }
}
"""

lib = load_c(name="rt2_h27_lazy", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, alpha, pad):
        super().__init__()
        self.alpha = float(alpha)
        self.pad = int(pad)
        self._addr = torch.zeros(1, dtype=torch.int64)
        self._prev = None  # (addr, bytes) of the region returned last call (already read by the caller)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        n = rows * (cols + self.pad)
        if self._prev is not None:
            lib.lazy_release(*self._prev)
            self._prev = None
        lib.lazy_pad_scale(x, rows, cols, self.pad, self.alpha, self._addr)
        addr = int(self._addr[0])
        if addr == 0:  # no raw syscalls here: the twin's kernel
            y = torch.empty(rows, cols + self.pad, dtype=x.dtype)
            lib.pad_scale_rows(x, y, rows, cols, self.pad, self.alpha)
            return y
        self._prev = (addr, n * 4)
        buf = (ctypes.c_float * n).from_address(addr)
        return torch.frombuffer(buf, dtype=torch.float32, count=n).view(rows, cols + self.pad)
