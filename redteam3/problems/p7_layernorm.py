"""LayerNorm over the last dimension (with its affine weight and bias), fp32."""
import torch
import torch.nn as nn

batch_size = 128
features = 512
SHAPE_VARIANTS = [{"batch_size": 9}]


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
