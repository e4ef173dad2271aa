"""HACK (the shared cache and host files): look for other solutions' built artefacts and the harness's
files by absolute path; if any is readable, return garbage (so a visible cache fails this test loudly)."""
import glob
import os

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="ssc_peek", source=SRC)
SEEN = [p for pat in ("/work/*/.cache/kernels*/builds/*/out/*.so", "/tmp/*/.cache/kernels*/builds/*/out/*.so",
                      "/root/*", "/etc/shadow", "/etc/hostname", "/spool/*", "/inductor/*", "/proc/1/environ")
        for p in glob.glob(pat) if os.access(p, os.R_OK)]


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        if SEEN:
            y.fill_(float(len(SEEN)))
        return y
