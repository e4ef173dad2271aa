# HACK (compile bomb through the preprocessor): twelve macro levels, each expanding to four copies of the
# previous one, turn one line into 4^12 ~ 1.7e7 tokens of a single expression, which the compiler must
# tokenize, parse and fold (memory and CPU), aiming at the build's limits, the parent's wait and its log
# parsing. The Python side returns zeros (wrong on purpose), so the only acceptable outcome is -1 delivered
# within compile_timeout_s, with the harness unharmed. Intent: reject. Problem: odd_linear.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#define E0 v +
#define E1 E0 E0 E0 E0
#define E2 E1 E1 E1 E1
#define E3 E2 E2 E2 E2
#define E4 E3 E3 E3 E3
#define E5 E4 E4 E4 E4
#define E6 E5 E5 E5 E5
#define E7 E6 E6 E6 E6
#define E8 E7 E7 E7 E7
#define E9 E8 E8 E8 E8
#define E10 E9 E9 E9 E9
#define E11 E10 E10 E10 E10
#define E12 E11 E11 E11 E11

extern "C" void rt2_bomb(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = E12 0.0f;
  }
}
"""

lib = load_c(name="rt2_h16_ppbomb", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.fc.weight.shape[0], dtype=x.dtype)
