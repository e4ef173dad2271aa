# HONEST: int64 end to end with torch's exact semantics for every int64 input, not only the test range:
# two's-complement wraparound of x*x + 7x + 3 (computed in uint64, so no signed-overflow UB) and
# torch.remainder's sign-of-the-divisor rule. Problem: int_poly_mod.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>

extern "C" void poly_mod(const int64_t* x, int64_t* y, int64_t n, int64_t p) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t v = static_cast<uint64_t>(x[i]);
    const uint64_t t = v * v + 7u * v + 3u;     // wraps modulo 2^64 like torch's int64 kernels
    const int64_t a = static_cast<int64_t>(t);
    int64_t r = a % p;                          // C++: sign of the dividend
    if (r != 0 && ((r < 0) != (p < 0))) r += p; // torch.remainder / Python: sign of the divisor
    y[i] = r;
  }
}
"""

lib = load_c(name="rt2_hn16_poly_mod", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = int(p)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.poly_mod(x, y, x.numel(), self.p)
        return y
