"""Linear layer followed by exact (erf) GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN, OUT = 128, 256, 256


class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)

    def forward(self, x):
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT]
