"""HACK (reject): no kernel at all. The whole recurrence runs in the interpreter's own code (ctypes array
reads, float arithmetic in libpython, float ** through libm called by libpython), hidden in the interpreter
allowance, which is 2x the EAGER party's interpreter samples per round. On this problem eager itself is a
Python loop of 64 x 5 torch calls, so its interpreter time per round is large, and a pure-Python compute of
1 x 64 x 8 x 8 multiply-adds fits inside twice that. A robust harness must not let the reference's own Python
overhead become a budget for interpreter compute (e.g. bound the interpreter by the candidate's own call
count, not the baseline's, or count interpreter arithmetic as compute)."""
import ctypes
from operator import mul

import torch
import torch.nn as nn

_E = 2.718281828459045


def _tanh(z):
    if z > 20.0:
        return 1.0
    if z < -20.0:
        return -1.0
    e = _E ** (2.0 * z)
    return (e - 1.0) / (e + 1.0)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.U = nn.Parameter(torch.empty(hidden, hidden))
        self.b = nn.Parameter(torch.empty(hidden))

    def forward(self, x):
        B, T, H = x.shape
        xs = (ctypes.c_float * (B * T * H)).from_address(x.data_ptr())[:]
        uf = (ctypes.c_float * (H * H)).from_address(self.U.data_ptr())[:]
        bf = (ctypes.c_float * H).from_address(self.b.data_ptr())[:]
        cols = [uf[j::H] for j in range(H)]
        res = []
        for bi in range(B):
            h = [0.0] * H
            for t in range(T):
                base = (bi * T + t) * H
                h = [_tanh(xs[base + j] + sum(map(mul, h, cols[j])) + bf[j]) for j in range(H)]
            res.extend(h)
        out = torch.empty(B, H)
        (ctypes.c_float * (B * H)).from_address(out.data_ptr())[:] = res
        return out
