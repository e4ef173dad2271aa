"""p4_divmod_int64 hack: int64 floor division through float64 division (no integer divide), with no range check.

Exact only while |a| and |b| stay below 2^53; the int64 domain goes to 2^63 (a = 2^60 + 1, b = 3 is already
wrong). Why it could pass: ``int_wide`` moves int64 inputs by 2^32, far below 2^53, and no round comes nearer the
dtype's range. It is also several times faster than integer division, so it would out-earn an exact kernel.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void divmod_f64(const int64_t* a, const int64_t* b, int64_t* q, int64_t* r, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t qi = (int64_t)std::floor((double)a[i] / (double)b[i]);
        q[i] = qi;
        r[i] = (int64_t)((uint64_t)a[i] - (uint64_t)qi * (uint64_t)b[i]);
    }
}
"""

lib = load_c(name="rt4_divmod_f64", source=SRC, extra_cflags=["-O3", "-fno-math-errno"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        q = torch.empty_like(a)
        r = torch.empty_like(a)
        lib.divmod_f64(a, b, q, r, a.numel())
        return q, r
