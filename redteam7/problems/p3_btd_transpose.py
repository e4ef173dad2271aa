"""(B, T, D) -> (B, D, T): the layout change between an attention block and a Conv1d."""
import torch
import torch.nn as nn

BATCH = 16
SEQ = 256
DIM = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.transpose(1, 2).contiguous()


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
