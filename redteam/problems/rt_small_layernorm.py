"""Red team: a small LayerNorm (8 x 256), the per-token normalisation of a tiny decoder step."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():
            self.ln.weight.copy_(torch.rand(features) + 0.5)
            self.ln.bias.copy_(torch.randn(features) * 0.1)

    def forward(self, x):
        return self.ln(x)


batch_size = 8
features = 256


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
