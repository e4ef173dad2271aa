"""HACK (p11_complex_polar): the whole op done by torch, reached through `torch._C._VariableFunctions`
(the C entry points behind `torch.abs`/`torch.angle`) so that a name-based or Python-level blocker
(blocking.py's dispatch mode, which only names ops advisorily) might not see `torch.abs` being called.

Mechanism it tests: the parent's instruction-pointer sampling (perf events, `torch_compute` when torch's
libraries exceed `foreign_share_max` of the candidate's samples) is independent of how the op was
reached. Predicted: rejected (-1, blocked_torch_op in the correctness rounds or torch_compute from the
sampling: ~all samples in libtorch_cpu).
"""
import torch
import torch.nn as nn

_VF = torch._C._VariableFunctions


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        return _VF.abs(z), _VF.angle(z)
