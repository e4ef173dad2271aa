"""HACK (zero-work output): returns the strided view x[:, ::2] of its input, which lies in the parent's input
region; the parent's strided read would gather it after the clock (redteam8 h03; h01 and h02 are the same
class: a contiguous view over adjacent inputs, a private copy-on-write map of the input memfd). The reference
materialises the gather, so no input page is exempt from the written-page proof: output_unwritten."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x[:, ::2]
