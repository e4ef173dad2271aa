"""HONEST (a view of the input where the reference returns one): the reference's own output aliases its
input (x.narrow), so the candidate's may too: those input pages stay exempt from the written-page proof."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x[:, :512]
