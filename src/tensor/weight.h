// A weight matrix view (into the model's mapping, plus its optional il copy): what the
// model loads and the matmul kernels (kernels/matmul.h) compute on.
#ifndef LM_TENSOR_WEIGHT_H
#define LM_TENSOR_WEIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

// W (n_out, n_in): n_out rows of n_in elements.
struct lm_weight {
    char name[64];     // GGUF tensor name (truncated), for the profiler and messages
    const void *data;  // NULL if the tensor is absent (optional weights)
    enum lm_dtype type;
    int64_t n_in;      // ne[0]
    int64_t n_out;     // ne[1] (1 for vectors)
    size_t row_bytes;
    const void *il;    // rows repacked into the il layout (kernels.h), NULL if not repacked
    size_t il_group_bytes;
};

#endif
