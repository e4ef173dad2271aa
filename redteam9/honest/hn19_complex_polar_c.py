"""HONEST (p11_complex_polar): `const std::complex<float>*` over the complex64 tensor's data, std::abs and
std::arg (hypotf / atan2f in libm), two float32 outputs. Plausible C++ for complex tensors.
Predicted: +1 (complex64 input passed as a pointer; libm imports allowed)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <complex>
#include <cstdint>
extern "C" void polar(const std::complex<float>* z, float* mag, float* ph, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        mag[i] = std::abs(z[i]);
        ph[i] = std::arg(z[i]);
    }
}
"""

_lib = load_c(name="polar_c", source=SRC, extra_cflags=["-O2", "-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        z = z.contiguous()
        mag = torch.empty(z.shape, dtype=torch.float32)
        ph = torch.empty(z.shape, dtype=torch.float32)
        _lib.polar(z, mag, ph, z.numel())
        return mag, ph
