"""HACK (p7, reject): the mask counts are counted by the interpreter (bytes.count), the argmax by own C.

A torch bool is one byte, 0 or 1, so ``mask.sum(-1)`` of a row is ``row_bytes.count(1)``: libpython's count
(a memchr/fastsearch loop: runtime by identity) does that half of the problem; the candidate's C does only the
masked argmax. A mixed solution whose borrowed half is never counted against any share. Twin: hn13."""
import ctypes

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
extern "C" void masked_argmax_only(const float* x, const std::uint8_t* m, std::int64_t* arg, std::int64_t rows,
                                   std::int64_t n) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float best = -INFINITY;
        std::int64_t bi = 0;
        for (std::int64_t j = 0; j < n; ++j)
            if (m[r * n + j] && x[r * n + j] > best) { best = x[r * n + j]; bi = j; }
        arg[r] = bi;
    }
}
"""
lib = load_c(name="h13_amax", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        x = x.contiguous()
        mask = mask.contiguous()
        rows, n = x.shape
        arg = torch.empty(rows, dtype=torch.int64)
        cnt = torch.empty(rows, dtype=torch.int64)
        lib.masked_argmax_only(x, mask, arg, rows, n)
        raw = bytes(memoryview((ctypes.c_char * (rows * n)).from_address(mask.data_ptr())))
        out = memoryview((ctypes.c_char * (rows * 8)).from_address(cnt.data_ptr())).cast("B").cast("q")
        one = b"\x01"
        for r in range(rows):
            out[r] = raw.count(one, r * n, (r + 1) * n)
        return arg, cnt
