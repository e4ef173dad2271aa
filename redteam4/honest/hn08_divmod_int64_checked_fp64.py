"""p4_divmod_int64 honest: float64 division where it is provably exact (|a|, |b| < 2^53: the rounded quotient
cannot cross an integer), the exact integer path for every other element; correct on the whole int64 domain,
fast on typical data."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

static inline int64_t floordiv_exact(int64_t av, int64_t bv) {
    if (bv == -1) return (int64_t)(0ULL - (uint64_t)av);
    if (bv == 0) return 0;  // outside the reference's domain (it raises); never fed
    int64_t qi = av / bv;
    const int64_t rem = av % bv;
    if (rem != 0 && ((rem < 0) != (bv < 0))) qi -= 1;
    return qi;
}

extern "C" void divmod_checked(const int64_t* a, const int64_t* b, int64_t* q, int64_t* r, int64_t n) {
    const int64_t lim = (int64_t)1 << 53;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t av = a[i], bv = b[i];
        int64_t qi;
        if (av > -lim && av < lim && bv > -lim && bv < lim && bv != 0)
            qi = (int64_t)std::floor((double)av / (double)bv);
        else
            qi = floordiv_exact(av, bv);
        q[i] = qi;
        r[i] = (int64_t)((uint64_t)av - (uint64_t)qi * (uint64_t)bv);
    }
}
"""

lib = load_c(name="rt4_divmod_checked", source=SRC, extra_cflags=["-O3", "-fno-math-errno"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        q = torch.empty_like(a)
        r = torch.empty_like(a)
        lib.divmod_checked(a, b, q, r, a.numel())
        return q, r
