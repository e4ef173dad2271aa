"""HACK (static C++ gaps): raw syscall, vfork, openat, secure_getenv, dladdr, std::filesystem in a kernel."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}

#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <filesystem>
extern "C" void sneaky(int fd) {
  const char* s = secure_getenv("SHIFTKIT_KERNEL_SECRET_SEED");
  int f = openat(AT_FDCWD, "/tmp/x", O_CREAT | O_WRONLY, 0644);
  syscall(SYS_write, fd, s, 4);
  if (vfork() == 0) _exit(0);
  Dl_info info; dladdr((void*)&sneaky, &info);
  std::filesystem::remove("/tmp/x");
  rename("/tmp/a", "/tmp/b"); unlink("/tmp/b"); creat("/tmp/c", 0644); (void)f;
}
"""
lib = load_c(name="ssc", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
