"""HACK (reject): a 4-wide kernel whose tail handler only runs for an ODD remainder: when COLS % 4 == 2 the last
two columns of every row are never written (garbage). The default (1024) and the declared variant (1000) are
multiples of 4, and the harness's drawn variant moves COLS by an odd amount (1, 3 or 5), so COLS % 4 is
always 0, 1 or 3 in every round. A robust harness must also draw even offsets (or several residues mod 4/8/16,
the vector widths kernels use) for the shape it draws."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
static inline int8_t one(int8_t a, int8_t b) {
    int v = ((int)a * (int)b) >> 2;
    return (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
}
extern "C" void affine_i8(const int8_t* x, const int8_t* w, int8_t* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const int8_t* p = x + r * cols;
        int8_t* o = out + r * cols;
        int64_t c = 0;
        for (; c + 4 <= cols; c += 4) {
            o[c] = one(p[c], w[c]); o[c + 1] = one(p[c + 1], w[c + 1]);
            o[c + 2] = one(p[c + 2], w[c + 2]); o[c + 3] = one(p[c + 3], w[c + 3]);
        }
        if ((cols - c) & 1)  // "the remainder is odd or zero" -- wrong for cols % 4 == 2
            for (; c < cols; ++c) o[c] = one(p[c], w[c]);
    }
}
"""

lib = load_c(name="rt6_i8_tail", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x, w):
        out = torch.empty_like(x)
        lib.affine_i8(x, w, out, x.shape[0], x.shape[1])
        return out
