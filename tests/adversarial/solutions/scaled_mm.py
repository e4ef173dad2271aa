"""HACK (library substitution): torch._scaled_mm (a vendor GEMM) called from forward instead of a kernel."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        one = torch.ones(())
        return torch._scaled_mm(A, B, scale_a=one, scale_b=one, out_dtype=torch.float32)
