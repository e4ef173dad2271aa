"""Hand-written: ELU on inputs from torch.rand (all positive): the problem's own distribution never
exercises the negative branch; the function does."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.elu(x, alpha=1.0)


batch_size = 256
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
