#pragma once
#include <cstdint>

extern "C" {
void embedding_bag_sum(const int64_t* indices, const int64_t* offsets, const float* weight, float* out,
                       int64_t n, int64_t bags, int64_t dim, int64_t num_embeddings);
}

namespace bag {
inline int64_t clamp_end(int64_t e, int64_t n) { return e > n ? n : e; }
}  // namespace bag
