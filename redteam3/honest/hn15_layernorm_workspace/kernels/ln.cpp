#include "ln.h"

#include <cmath>

extern "C" void layernorm_fwd(const float* x, const float* w, const float* b, float* y, std::int64_t rows,
                              std::int64_t D, double eps) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * D;
        float* yr = y + r * D;
        double mean = 0.0;
        for (std::int64_t i = 0; i < D; ++i) mean += xr[i];
        mean /= static_cast<double>(D);
        double var = 0.0;
        for (std::int64_t i = 0; i < D; ++i) {
            const double d = xr[i] - mean;
            var += d * d;
        }
        var /= static_cast<double>(D);
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (std::int64_t i = 0; i < D; ++i)
            yr[i] = static_cast<float>((static_cast<double>(xr[i]) - mean) * rstd * w[i] + b[i]);
    }
}
