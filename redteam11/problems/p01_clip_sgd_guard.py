"""Clipped SGD step, in place: g.clamp_(-CLIP, CLIP) (a value clip of the gradient, written back), then
p -= LR * g; returns p. With N(0,1) gradients the clip changes no value on the problem's own inputs (|g| < 8),
but it does on scaled-up inputs."""
import torch
import torch.nn as nn

N = 1 << 20
CLIP = 8.0
LR = 0.05


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, g):
        g.clamp_(-CLIP, CLIP)
        p.add_(g, alpha=-LR)
        return p


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
