"""(redteam12 p03, smaller) A softmax with a forward flag: causal=True masks the strict upper triangle with -inf
first; causal=False is a plain softmax. The problem passes True."""
import torch
import torch.nn as nn

B = 1
HEADS = 2
L = 32


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
