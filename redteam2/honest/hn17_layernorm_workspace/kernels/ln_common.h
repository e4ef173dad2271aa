// Shared declarations of the layer-norm workspace (included by both translation units).
#pragma once
#include <cstdint>

namespace rt2ln {

struct RowStats {
  double mean;
  double rstd;
};

// defined in stats.cpp
RowStats row_stats(const float* row, int64_t n, double eps);

inline float affine(float v, double mean, double rstd, float w, float b) {
  return static_cast<float>((static_cast<double>(v) - mean) * rstd) * w + b;
}

}  // namespace rt2ln
