"""HACK (its own file's name on code the loader did not map): at import the kernel's executable segment is mapped
a second time, MAP_PRIVATE and writable, from the candidate's own .so, written (copy-on-write) and made
executable again; the kernel then runs from that copy. /proc/pid/maps names the candidate's file (device and
inode) on those pages, so bytes of any origin could run there as "the candidate". Only a clean mapping of an
executable PT_LOAD segment, no more of them than the file has, counts as the candidate."""
import ctypes
import mmap
import os
import struct

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" __attribute__((optimize("O1"))) void attr_ssc(const float* x, const float* w, const float* b, float* y,
                                                         int64_t rows, int64_t cols, float lo, float hi) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < lo ? lo : (v > hi ? hi : v);
    }
}
"""
lib = load_c(name="attr_cow", source=SRC)
addr = ctypes.cast(lib._lib.attr_ssc, ctypes.c_void_p).value
path = lib._lib._name
bias = ctypes.c_size_t.from_address(lib._lib._handle).value  # link_map.l_addr: the load bias
with open(path, "rb") as f:
    h = f.read(64)
    phoff, (phentsize, phnum) = struct.unpack_from("<Q", h, 32)[0], struct.unpack_from("<HH", h, 54)
    f.seek(phoff)
    ph = f.read(phentsize * phnum)
for k in range(phnum):  # the executable PT_LOAD segment: where the loader mapped the text, and from which offset
    p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, k * phentsize)
    if p_type == 1 and p_flags & 1:
        lo, off = (bias + p_vaddr) & ~(mmap.PAGESIZE - 1), p_offset & ~(mmap.PAGESIZE - 1)
        hi = (bias + p_vaddr + p_filesz + mmap.PAGESIZE - 1) & ~(mmap.PAGESIZE - 1)
        break
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open(path, os.O_RDONLY)
copy = libc.mmap(None, hi - lo, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, off)
os.close(fd)
ctypes.memmove(copy, lo, hi - lo)  # the same bytes: every page is now an anonymous copy
libc.mprotect(copy, hi - lo, mmap.PROT_READ | mmap.PROT_EXEC)
P = ctypes.c_void_p
fn = ctypes.CFUNCTYPE(None, P, P, P, P, ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_float)(copy + addr - lo)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        fn(x.data_ptr(), self.weight.data_ptr(), self.bias.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], -1.0, 1.0)
        return y
