#include <torch/extension.h>
#include "kernels/lse.h"

torch::Tensor lse_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "lse_rows: expected a 2-D tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat64, "lse_rows: expected float64");
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0)}, xc.options());
    lse_rows_f64(xc.data_ptr<double>(), y.data_ptr<double>(), xc.size(0), xc.size(1));
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("lse_rows", &lse_rows, "row-wise logsumexp (float64)");
}
