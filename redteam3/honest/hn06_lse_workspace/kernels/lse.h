#ifndef RT3_LSE_H
#define RT3_LSE_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
void lse_rows_f64(const double *x, double *y, int64_t rows, int64_t cols);
#ifdef __cplusplus
}
#endif
#endif
