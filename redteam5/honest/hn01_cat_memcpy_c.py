"""p1: row-wise concatenation with memcpy in a lean C kernel."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstring>
#include <cstdint>
extern "C" void cat_rows(const float* x, const float* y, float* out, std::int64_t rows, std::int64_t n1, std::int64_t n2) {
    const std::int64_t w = n1 + n2;
    for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(out + r * w, x + r * n1, sizeof(float) * n1);
        std::memcpy(out + r * w + n1, y + r * n2, sizeof(float) * n2);
    }
}
"""
lib = load_c(name="hn01_cat", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty(x.shape[0], x.shape[1] + y.shape[1], dtype=x.dtype)
        lib.cat_rows(x, y, out, x.shape[0], x.shape[1], y.shape[1])
        return out
