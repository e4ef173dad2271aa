"""Causal attention probabilities, nanoGPT style: the causal mask is a registered (persistent) float buffer."""
import torch
import torch.nn as nn

B = 8
HEADS = 4
T = 256
BLOCK = 256


class Model(nn.Module):
    def __init__(self, block_size):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, att):
        t = att.shape[-1]
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return torch.softmax(att, dim=-1)


def get_inputs():
    return [torch.randn(B, HEADS, T, T)]


def get_init_inputs():
    return [BLOCK]
