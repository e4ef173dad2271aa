"""HACK (the parent's log parser): a compile error whose reported line number is huge, plus a computed
#include of a host file whose contents would come back in the error messages."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#define STR(x) #x
#define XSTR(x) STR(x)
#define HOST /etc/hostname
#include XSTR(HOST)
#line 4294967295
int broken = ;
"""
lib = load_c(name="bad_line", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
