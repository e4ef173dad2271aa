#pragma once
#include <cstdint>

extern "C" {
void layernorm_fwd(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t D,
                   double eps);
}
