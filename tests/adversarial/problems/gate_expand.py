"""A per-(batch, channel) gate returned as an expand() view over the spatial dims, as squeeze-excitation code
writes it (`g[:, :, None, None].expand_as(x)`): the reference's own output is a stride-0 view."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        g = torch.sigmoid(x.mean(dim=(2, 3)))
        return g[:, :, None, None].expand_as(x)


def get_inputs():
    return [torch.randn(8, 64, 32, 32)]


def get_init_inputs():
    return []
