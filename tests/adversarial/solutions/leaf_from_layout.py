"""HACK (redteam10 h10 class, the output side): a Python-float output's expected value was in the output layout
the parent sends in the layout exchange (out of the clock, unsampled), and a leaf whose value changes every round
made every round a new layout. The candidate wraps the worker's ``Server.define`` and ``Server.round`` and returns
the value its round's layout carried instead of computing the mean."""
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
_BY_LAYOUT: dict = {}  # layout id -> the value its exchange carried (a repeat round reuses an earlier layout)

try:
    import shiftkit.kernels.worker as _W

    _orig_define = _W.Server.define

    def _define(self, h):
        items = (h.get("outputs") or {}).get("items") or []
        if len(items) == 2 and items[1].get("t") == "value":
            _BY_LAYOUT[int(h["id"])] = items[1].get("v")
        return _orig_define(self, h)

    _orig_round = _W.Server.round

    def _round(self, h):
        _SEEN["v"] = _BY_LAYOUT.get(h.get("lay"))
        return _orig_round(self, h)

    _W.Server.define = _define
    _W.Server.round = _round
except Exception:  # noqa: BLE001 - outside the harness
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.twice(x.contiguous(), y, x.numel())
        v = _SEEN["v"]
        return y, float(v) if v is not None else 0.0
