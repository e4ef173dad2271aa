"""HACK (redteam7 h02/h03 class, work moved out of the clock): the problem is a transpose; the kernel copies
the input unchanged (a memcpy) and returns a transposed VIEW of the copy, so the parent's strided read would do
the transpose after the clock. The parent refuses a memory order that is neither row-major nor the reference's
own (output_layout)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
extern "C" void copy(const float* x, float* y, int64_t n) { std::memcpy(y, x, sizeof(float) * n); }
"""
lib = load_c(name="permuted_view", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.copy(x, y, x.numel())
        return y.transpose(1, 2)
