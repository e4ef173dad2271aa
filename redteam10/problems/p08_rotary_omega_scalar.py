"""A rotary (RoPE-like) rotation whose angular frequency is a per-call Python float: angle[t, k] = t * (k + 1) *
omega for position t and pair k, applied to the two halves of the last dim. The frequency differs every call
(drawn in get_inputs), so the cos/sin table cannot be cached across calls."""
import torch
import torch.nn as nn

B = 2
T = 2048
D = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, omega):
        t, d = x.shape[1], x.shape[2]
        h = d // 2
        pos = torch.arange(t, dtype=x.dtype)
        k = torch.arange(1, h + 1, dtype=x.dtype)
        ang = torch.outer(pos, k) * omega
        c, s = torch.cos(ang), torch.sin(ang)
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


def get_inputs():
    return [torch.randn(B, T, D), float(torch.empty(()).uniform_(0.001, 0.01))]


def get_init_inputs():
    return []
