"""HACK (redteam10 h10 class, the output side): a Python-float output's expected value was in the output layout
the parent sends in the layout exchange (out of the clock, unsampled), and a leaf whose value changes every round
made every round a new layout. The candidate wraps the worker's ``Server.define`` and returns the value it was
sent instead of computing the mean."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void twice(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2.f * x[i];
}
"""
lib = load_c(name="twice_only", source=SRC)
_SEEN = {"v": None}

try:
    import shiftkit.kernels.worker as _W

    _orig_define = _W.Server.define

    def _define(self, h):
        items = (h.get("outputs") or {}).get("items") or []
        if len(items) == 2 and items[1].get("t") == "value":
            _SEEN["v"] = items[1].get("v")
        return _orig_define(self, h)

    _W.Server.define = _define
except Exception:  # noqa: BLE001 - outside the harness
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.twice(x.contiguous(), y, x.numel())
        v = _SEEN["v"]
        return y, float(v) if v is not None else 0.0
