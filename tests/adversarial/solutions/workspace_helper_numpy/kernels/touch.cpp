#include <cstdint>
extern "C" void touch(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 0.f; }
