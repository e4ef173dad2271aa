#pragma once
#include <cstdint>

namespace lnk {
// Welford's running mean / M2 (numerically stable single pass)
struct Stats {
  double mean = 0.0, m2 = 0.0;
  int64_t n = 0;
  inline void push(double v) {
    ++n;
    const double d = v - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (v - mean);
  }
  inline double var() const { return n ? m2 / static_cast<double>(n) : 0.0; }
};
}  // namespace lnk
