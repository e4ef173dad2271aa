// Per-row mean and reciprocal standard deviation (biased variance), two passes in double.
#include <cmath>

#include "ln_common.h"

namespace rt2ln {

RowStats row_stats(const float* row, int64_t n, double eps) {
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += row[j];
  const double mean = s / static_cast<double>(n);
  double ss = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const double d = row[j] - mean;
    ss += d * d;
  }
  const double var = ss / static_cast<double>(n);
  return RowStats{mean, 1.0 / std::sqrt(var + eps)};
}

}  // namespace rt2ln
