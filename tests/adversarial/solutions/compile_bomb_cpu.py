"""HACK (compile bomb, CPU): constant evaluation that runs for minutes; the build must be killed at its timeout."""
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

// each constant stays under gcc's constexpr loop and operation limits; 60 of them take minutes
constexpr long burn(long s) { long x = 0; for (long i = 0; i < 2000; ++i) for (long j = 0; j < 2000; ++j) x += (i ^ j ^ s) % 7; return x; }
constexpr long B0 = burn(0);
constexpr long B1 = burn(1);
constexpr long B2 = burn(2);
constexpr long B3 = burn(3);
constexpr long B4 = burn(4);
constexpr long B5 = burn(5);
constexpr long B6 = burn(6);
constexpr long B7 = burn(7);
constexpr long B8 = burn(8);
constexpr long B9 = burn(9);
constexpr long B10 = burn(10);
constexpr long B11 = burn(11);
constexpr long B12 = burn(12);
constexpr long B13 = burn(13);
constexpr long B14 = burn(14);
constexpr long B15 = burn(15);
constexpr long B16 = burn(16);
constexpr long B17 = burn(17);
constexpr long B18 = burn(18);
constexpr long B19 = burn(19);
constexpr long B20 = burn(20);
constexpr long B21 = burn(21);
constexpr long B22 = burn(22);
constexpr long B23 = burn(23);
constexpr long B24 = burn(24);
constexpr long B25 = burn(25);
constexpr long B26 = burn(26);
constexpr long B27 = burn(27);
constexpr long B28 = burn(28);
constexpr long B29 = burn(29);
constexpr long B30 = burn(30);
constexpr long B31 = burn(31);
constexpr long B32 = burn(32);
constexpr long B33 = burn(33);
constexpr long B34 = burn(34);
constexpr long B35 = burn(35);
constexpr long B36 = burn(36);
constexpr long B37 = burn(37);
constexpr long B38 = burn(38);
constexpr long B39 = burn(39);
constexpr long B40 = burn(40);
constexpr long B41 = burn(41);
constexpr long B42 = burn(42);
constexpr long B43 = burn(43);
constexpr long B44 = burn(44);
constexpr long B45 = burn(45);
constexpr long B46 = burn(46);
constexpr long B47 = burn(47);
constexpr long B48 = burn(48);
constexpr long B49 = burn(49);
constexpr long B50 = burn(50);
constexpr long B51 = burn(51);
constexpr long B52 = burn(52);
constexpr long B53 = burn(53);
constexpr long B54 = burn(54);
constexpr long B55 = burn(55);
constexpr long B56 = burn(56);
constexpr long B57 = burn(57);
constexpr long B58 = burn(58);
constexpr long B59 = burn(59);
"""
lib = load_c(name="ssc", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
