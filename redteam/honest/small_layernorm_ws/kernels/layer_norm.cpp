// Row-wise LayerNorm with affine weight and bias. Lean C ABI.
#include <cmath>
#include "common.h"

extern "C" void layer_norm_rows(const float* x, const float* weight, const float* bias, float* out,
                                int64_t rows, int64_t cols, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    lnk::Stats st;
    for (int64_t c = 0; c < cols; ++c) st.push(xr[c]);
    const float mean = static_cast<float>(st.mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(st.var() + eps));
    float* o = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
  }
}
