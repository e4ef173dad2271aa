"""HONEST (p3_scatter_onehot): the source is an f-string that bakes in a module-level constant (the memset
chunk size) -- static in every sense, but an ast.JoinedStr. Probe: dynamic_sources on an f-string whose only
placeholder is a module-level integer literal."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

CHUNK = 1024

SRC = f"""
#include <cstdint>
#include <cstring>
#define CHUNK {CHUNK}
extern "C" void onehot(const int64_t* idx, const float* val, float* out, int64_t rows, int64_t classes) {{
    for (int64_t r = 0; r < rows; ++r) {{
        float* o = out + r * classes;
        for (int64_t c = 0; c < classes; c += CHUNK) {{
            const int64_t n = classes - c < CHUNK ? classes - c : CHUNK;
            std::memset(o + c, 0, sizeof(float) * n);
        }}
        o[idx[r]] = val[r];
    }}
}}
"""

lib = load_c(name="rt6_onehot_fstr", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes

    def forward(self, idx, val):
        out = torch.empty(idx.shape[0], self.classes, dtype=val.dtype)
        lib.onehot(idx, val, out, idx.shape[0], self.classes)
        return out
