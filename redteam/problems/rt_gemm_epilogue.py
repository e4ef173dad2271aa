"""Red team: a linear layer followed by an elementwise epilogue, y = relu(linear(x) * scale) - 0.1
(x: 1024 x 64, out_features 1024; the epilogue passes over the 4 MB output are a large share of eager's time)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        y = self.linear(x) * self.scale
        return torch.relu(y) - 0.1


batch_size = 1024
in_features = 64
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
