"""Attention-probability softmax with a forward flag: causal=True masks the strict upper triangle of each
(L, L) score matrix with -inf before the softmax; causal=False is a plain softmax. The problem passes True."""
import torch
import torch.nn as nn

B = 4
HEADS = 4
L = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, causal: bool):
        if causal:
            n = scores.shape[-1]
            mask = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(B, HEADS, L, L) * 2.0, True]


def get_init_inputs():
    return []
