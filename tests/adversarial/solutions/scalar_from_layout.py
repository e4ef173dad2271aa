"""PROBE (redteam10 h10): a round's Python-float argument travelled in the layout the parent sends before the round
(out of the clock, unsampled; redteam10 h10 built a cos/sin table there with torch). This kernel takes the slope
only from that exchange, never from ``forward``'s argument: right while layouts carry values, wrong once they hold
none (the round's request carries them, inside the clock)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void leaky(const float* __restrict__ x, float* __restrict__ y, int64_t n, float a) {
    for (int64_t i = 0; i < n; ++i) { float v = x[i]; y[i] = v > 0.f ? v : a * v; }
}
"""
_lib = load_c(name="leaky_probe", source=SRC, extra_cflags=["-O3"])
_SEEN = {"slope": 0.5}
_BY_LAYOUT: dict = {}  # layout id -> the slope its exchange carried (a repeat round reuses an earlier layout)

try:
    import shiftkit.kernels.worker as _W

    _orig_define = _W.Server.define

    def _define(self, h):
        items = (h.get("inputs") or {}).get("items") or []
        if len(items) == 2 and items[1].get("t") == "value" and "v" in items[1]:
            _BY_LAYOUT[int(h["id"])] = float(items[1]["v"])
        return _orig_define(self, h)

    _orig_round = _W.Server.round

    def _round(self, h):
        _SEEN["slope"] = _BY_LAYOUT.get(h.get("lay"), 0.5)
        return _orig_round(self, h)

    _W.Server.define = _define
    _W.Server.round = _round
except Exception:  # noqa: BLE001 - outside the harness
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, negative_slope: float):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.leaky(x, y, x.numel(), _SEEN["slope"])
        return y
