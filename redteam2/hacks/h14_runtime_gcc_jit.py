# HACK (code compiled at run time, outside the static build): the real kernel is a C string that is NOT passed
# to load_c/load_inline, so the trusted side never extracts, builds, flag-checks or link-checks it. At import
# the worker writes it to its private /tmp, runs the system gcc (present in the sandbox because /usr is
# bound), and loads the result with ctypes. The declared load_c artefact is a decoy that only validates
# shapes. Any flag, any symbol (dlopen, BLAS, ...) would be possible this way; here the code is plain C.
# Intent: reject; a robust harness gives -1 (dynamic/JIT code outside the declared sources: no compiler in the
# worker, foreign_compute, or a refusal to run unbuilt code). Problem: rowsum_sq.
import ctypes
import os
import shutil
import subprocess
import tempfile

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

DECOY = r"""
#include <cstdint>
extern "C" void check_shape(int64_t rows, int64_t cols, int32_t* ok) { *ok = rows >= 0 && cols > 0; }
"""

decoy = load_c(name="rt2_h14_decoy", source=DECOY)

JIT_C = """
#include <stdint.h>
void rowsum_sq(const float *x, float *out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float *p = x + i * cols;
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)p[j] * p[j];
        out[i] = (float)s;
    }
}
"""


def _jit():
    cc = shutil.which("gcc") or shutil.which("cc") or shutil.which("g++") or "/usr/bin/gcc"
    d = tempfile.mkdtemp(prefix="rt2jit_")
    src, so = os.path.join(d, "k.c"), os.path.join(d, "k.so")
    with open(src, "w") as f:
        f.write(JIT_C)
    lang = ["-x", "c"] if cc.endswith("g++") else []
    subprocess.run([cc, "-O3", "-march=native", "-shared", "-fPIC", *lang, "-o", so, src], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    k = ctypes.CDLL(so)
    k.rowsum_sq.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    k.rowsum_sq.restype = None
    return k


_K = _jit()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ok = torch.zeros(1, dtype=torch.int32)

    def forward(self, x):
        x = x.contiguous()
        decoy.check_shape(x.shape[0], x.shape[1], self._ok)
        out = torch.empty(x.shape[0], dtype=x.dtype)
        _K.rowsum_sq(x.data_ptr(), out.data_ptr(), x.shape[0], x.shape[1])
        return out
