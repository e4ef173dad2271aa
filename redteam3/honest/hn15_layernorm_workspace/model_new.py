# HONEST: lean workspace (model_new.py + kernels/ln.cpp + kernels/ln.h, no torch headers, so kernel_ext is the
# lean C ABI library). Two-pass mean/variance in double (exact for any offset/scale of the rows), eps and the
# affine weight/bias applied. Problem: p7_layernorm. (Twin of hacks/h07 and hacks/h16.)
import torch
import torch.nn as nn

import kernel_ext


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        D = x.shape[-1]
        kernel_ext.layernorm_fwd(x, self.ln.weight.detach(), self.ln.bias.detach(), y, x.numel() // D, D,
                                 float(self.ln.eps))
        return y
