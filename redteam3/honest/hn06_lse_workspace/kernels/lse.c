/* Plain C99: restrict, mixed declarations, math.h. Max-shifted logsumexp per row, torch semantics. */
#include <math.h>
#include <stdint.h>
#include "lse.h"

static double row_lse(const double *restrict x, int64_t n) {
    double m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        if (isnan(x[i])) return NAN;
        if (x[i] > m) m = x[i];
    }
    const double shift = isinf(m) ? 0.0 : m;
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += exp(x[i] - shift);
    return log(s) + shift;
}

void lse_rows_f64(const double *restrict x, double *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) y[r] = row_lse(x + r * cols, cols);
}
