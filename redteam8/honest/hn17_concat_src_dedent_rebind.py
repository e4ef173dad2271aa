"""Honest FP probe: the kernel source is written indented and normalised with `SRC = textwrap.dedent(SRC)` at
module level (a name rebound from itself), then built with load_c.

Predicted rejection: specs._module_bindings keeps only the last binding of SRC, whose expression refers to SRC
itself; specs._literal follows the name into its own binding until depth 50 ("nested too deeply"), and a
module-level call has no helper fallback: dynamic_sources. The source is a pure string function of a literal."""
import textwrap

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
    #include <stdint.h>
    #include <string.h>
    extern "C" void concat_rows(const float* a, const float* b, float* out, int64_t na, int64_t nb) {
        memcpy(out, a, (size_t)na * sizeof(float));
        memcpy(out + na, b, (size_t)nb * sizeof(float));
    }
"""
SRC = textwrap.dedent(SRC)

_lib = load_c(name="concat_rows_dedent", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0] + b.shape[0],) + tuple(a.shape[1:]), dtype=a.dtype)
        _lib.concat_rows(a, b, out, a.numel(), b.numel())
        return out
