# HACK (integer range assumed from the input distribution): the inputs are randint(0, 2^15), so x*x + 7x + 3
# fits in 31 bits; the kernel reads only the low 32 bits of each int64 and does 32-bit arithmetic and a
# 32-bit modulo (cheaper than 64-bit division). Exact on every harness input - there are no floating tensors,
# so no sign/scale transform ever touches them - and wrong for any |x| >= 2^15 or negative x.
# Intent: reject; a robust harness gives -1 (integer inputs beyond the sampled range: negatives, large
# magnitudes, wraparound). Problem: int_poly_mod.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>

extern "C" void poly_mod32(const int64_t* x, int64_t* y, int64_t n, int64_t p) {
  const uint32_t pm = static_cast<uint32_t>(p);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(x[i]);
    y[i] = static_cast<int64_t>((v * v + 7u * v + 3u) % pm);
  }
}
"""

lib = load_c(name="rt2_h22_int32", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = int(p)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.poly_mod32(x, y, x.numel(), self.p)
        return y
