"""Honest (twin of h10): a fresh output per call, zeroed and set by the kernel (memset + one store per row)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" int one_hot(const int64_t* labels, float* out, int64_t n, int64_t classes) {
    memset(out, 0, sizeof(float) * (size_t)(n * classes));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t c = labels[i];
        if (c < 0 || c >= classes) return -1;
        out[i * classes + c] = 1.0f;
    }
    return 0;
}
"""

_lib = load_c(name="one_hot", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, labels):
        labels = labels.contiguous()
        out = torch.empty(*labels.shape, self.num_classes, dtype=torch.float32)
        if _lib.one_hot(labels, out, labels.numel(), self.num_classes) != 0:
            raise RuntimeError("Class values must be smaller than num_classes.")
        return out
