"""A Linear projection over tokens whose activation scales span many decades (massive-activation tokens next
to near-silent ones: per-token scale log-normal with sigma 4). After redteam8 p4."""
import torch
import torch.nn as nn

TOKENS = 256
IN = 256
OUT = 256


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(TOKENS, IN) * torch.exp(4.0 * torch.randn(TOKENS, 1))]


def get_init_inputs():
    return [IN, OUT]
