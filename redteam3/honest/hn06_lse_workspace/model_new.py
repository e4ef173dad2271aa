# HONEST: CUDA-Agent-style workspace: model_new.py + a helper module + kernels/lse.c (plain C99 with restrict)
# + kernels/lse.h + binding.cpp (a pybind torch binding calling the C function), imported as kernel_ext.
# Problem: p2_logsumexp_fp64. Same full-domain semantics as honest/hn05 (max shift, +-inf, NaN).
import torch.nn as nn

import kernel_ext
from helpers import as_rows


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return kernel_ext.lse_rows(as_rows(x))
