# HACK (family 2/5): rebinds the worker's Server.round so that every reply carries an empty 'values' list. The
# problem's output has a non-tensor leaf (a Python int), which the parent takes from the reply's values: a
# well-formed reply with too few values. A robust parent reports a protocol violation.
import sys

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void two_x_plus_one(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
"""

lib = load_c(name="two_x_plus_one", source=SRC)

_W = sys.modules.get("shiftkit.kernels.worker")
if _W is not None:
    _orig_round = _W.Server.round

    def _round(self, h):
        r = _orig_round(self, h)
        r["values"] = []
        return r

    _W.Server.round = _round


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.two_x_plus_one(x, y, x.numel())
        return y, x.shape[1]
