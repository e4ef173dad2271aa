import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(()))

    def forward(self, x):
        while True:
            pass
