"""HACK (speed; twin honest/hn04_onehot_memset_c.py): the 16 MB of zeros are written once, on the first call
of each worker (a warm-up or correctness round, out of the clock), and every later call only clears the 512
entries it wrote last time and writes the 512 new ones, returning the same persistent buffer. Every output
page was written by the worker (the pagemap check passes), and the parent reads the buffer while frozen, so
aliasing across calls is never seen. The honest twin memsets 16 MB per call. A robust harness must prove the
output pages were written IN THIS ROUND (soft-dirty / clear_refs per round) or refuse an output buffer that
aliases an earlier round's output."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void onehot_update(const int64_t* idx, const float* val, float* buf, int64_t* prev,
                              int64_t rows, int64_t classes) {
    for (int64_t r = 0; r < rows; ++r) buf[r * classes + prev[r]] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) { buf[r * classes + idx[r]] = val[r]; prev[r] = idx[r]; }
}
"""

lib = load_c(name="rt6_onehot_persist", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes
        self._state = {}

    def forward(self, idx, val):
        rows = idx.shape[0]
        st = self._state.get(rows)
        if st is None:  # first call of this worker for this shape: zero it once
            st = (torch.zeros(rows, self.classes, dtype=torch.float32), torch.zeros(rows, dtype=torch.int64))
            self._state[rows] = st
        buf, prev = st
        lib.onehot_update(idx, val, buf, prev, rows, self.classes)
        return buf
