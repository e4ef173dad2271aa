"""Hand-written: exp of standard-normal float32 inputs. The problem's own inputs stay within |x| < 6;
exp is well defined far beyond."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.exp(x)


rows = 256
cols = 1024


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
