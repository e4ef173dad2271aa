"""The classic sinusoidal PositionalEncoding (PyTorch tutorial; dropout omitted): pe is a persistent
buffer, as register_buffer makes it by default."""
import math

import torch
import torch.nn as nn

BATCH = 8
SEQ = 1024
D_MODEL = 256
MAX_LEN = 4096


class Model(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(1)]


def get_inputs():
    return [torch.randn(BATCH, SEQ, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, MAX_LEN]
