"""Attention-style masked softmax: scores masked where the boolean mask is False, then softmax over the last dim."""
import torch
import torch.nn as nn

batch = 8
L = 256
SHAPE_VARIANTS = [{"L": 128}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def get_inputs():
    return [torch.randn(batch, L, L), torch.tril(torch.ones(L, L, dtype=torch.bool))]


def get_init_inputs():
    return []
