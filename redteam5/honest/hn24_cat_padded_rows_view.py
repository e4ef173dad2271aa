"""p1: rows written into a buffer whose leading dimension is padded to a multiple of 64 bytes (aligned row starts
for every row), the result returned as the [:, :N1+N2] view of that buffer: a valid strided tensor with the right
shape, dtype and values (torch returns such views from slicing all the time).

Honest-kernel probe: the worker makes the non-contiguous view contiguous (torch's copy) inside the round."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstring>
#include <cstdint>
extern "C" void cat_rows_ld(const float* x, const float* y, float* out, std::int64_t rows, std::int64_t n1,
                            std::int64_t n2, std::int64_t ld) {
    for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(out + r * ld, x + r * n1, sizeof(float) * n1);
        std::memcpy(out + r * ld + n1, y + r * n2, sizeof(float) * n2);
    }
}
"""
lib = load_c(name="hn24_cat", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        rows, n1, n2 = x.shape[0], x.shape[1], y.shape[1]
        w = n1 + n2
        ld = (w + 15) // 16 * 16 + 16  # 64-byte multiple plus one cache line: no 4K aliasing between rows
        buf = torch.empty(rows, ld, dtype=x.dtype)
        lib.cat_rows_ld(x, y, buf, rows, n1, n2, ld)
        return buf[:, :w]
