"""p10: a lean build from several files (sources={...}): a header with an inline template scan, a C++ unit that
includes it by a quoted relative path, an 8-wide unrolled inner loop."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

HDR = r"""
#pragma once
#include <cstdint>
namespace scan {
template <typename In, typename Acc>
inline void row(const In* __restrict__ x, Acc* __restrict__ o, std::int64_t n) {
    Acc acc = 0;
    std::int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        acc += x[j];     o[j] = acc;
        acc += x[j + 1]; o[j + 1] = acc;
        acc += x[j + 2]; o[j + 2] = acc;
        acc += x[j + 3]; o[j + 3] = acc;
        acc += x[j + 4]; o[j + 4] = acc;
        acc += x[j + 5]; o[j + 5] = acc;
        acc += x[j + 6]; o[j + 6] = acc;
        acc += x[j + 7]; o[j + 7] = acc;
    }
    for (; j < n; ++j) { acc += x[j]; o[j] = acc; }
}
}  // namespace scan
"""
UNIT = r"""
#include "scan.h"
extern "C" void cumsum_rows(const std::int32_t* x, std::int64_t* out, std::int64_t rows, std::int64_t n) {
    for (std::int64_t r = 0; r < rows; ++r) scan::row<std::int32_t, std::int64_t>(x + r * n, out + r * n, n);
}
"""
lib = load_c(name="hn28_cs", sources={"scan.h": HDR, "cumsum.cpp": UNIT}, extra_cflags=["-O3", "-std=gnu++20"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape, dtype=torch.int64)
        lib.cumsum_rows(x, out, x.shape[0], x.shape[1])
        return out
