import torch
import torch.nn as nn

V = 50000
D = 128
B = 2048
K = 16


class Model(nn.Module):
    """Fixed-size bags: gather K embedding rows per bag (int64 indices) and sum them."""

    def __init__(self, v, d):
        super().__init__()
        self.emb = nn.Embedding(v, d)

    def forward(self, idx):
        return self.emb(idx).sum(1)


def get_inputs():
    return [torch.randint(0, V, (B, K), dtype=torch.int64)]


def get_init_inputs():
    return [V, D]
