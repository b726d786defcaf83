// The Walsh-Hadamard rotation of a q8_0 KV cache (lm_hadamard, runtime/ops.h).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/ops.h"

// The Walsh-Hadamard rotation of a q8_0 KV cache (context.h kv_rot_k / kv_rot_v; llama.cpp's
// attn_rot): x's n values in blocks of nb (a power of two) each become H x / sqrt(nb), H the
// Sylvester Hadamard matrix ([[H, H], [H, -H]], what llama.cpp's ggml_gen_hadamard builds),
// by the butterflies of the fast transform. H / sqrt(nb) is orthonormal and its own inverse,
// so rotating q and k keeps q.k, and rotating v then the attention output back keeps the
// output; what changes is what q8_0 stores: a channel of large values (Qwen2.5's K biases,
// a few dims hundreds of times the others) is spread over the block, so the blocks' scales
// no longer flatten the other channels to a few levels. Adds, subtracts and one multiply per
// value, no fma: every build and table gets the same bits.
typedef float lm_v16f __attribute__((vector_size(64)));
typedef int32_t lm_v16i __attribute__((vector_size(64)));

void lm_hadamard(float *x, int64_t n, int64_t nb) {
    const float scale = 1.0f / sqrtf((float)nb);
    // the butterflies within 16 values (h = 1, 2, 4, 8) on vectors: lane j takes
    // x[j] + x[j ^ h] where bit h of j is clear, x[j ^ h] - x[j] where it is set
    static const lm_v16i perm[4] = {
        {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
        {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
        {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
        {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},
    };
    static const lm_v16i hi[4] = {
        {0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1},
        {0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1},
        {0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1},
        {0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1},
    };
    for (int64_t b = 0; b < n; b += nb) {
        float *y = x + b;
        for (int64_t i = 0; i < nb; i += 16) {
            lm_v16f v;
            memcpy(&v, y + i, sizeof v);
            for (int s = 0; s < 4; s++) {
                const lm_v16f w = __builtin_shuffle(v, perm[s]);
                v = (lm_v16f)(((lm_v16i)(w - v) & hi[s]) | ((lm_v16i)(v + w) & ~hi[s]));
            }
            memcpy(y + i, &v, sizeof v);
        }
        for (int64_t h = 16; h < nb; h *= 2)
            for (int64_t i = 0; i < nb; i += 2 * h)
                for (int64_t j = i; j < i + h; j++) {
                    const float u = y[j], v = y[j + h];
                    y[j] = u + v;
                    y[j + h] = u - v;
                }
        for (int64_t j = 0; j < nb; j++) y[j] *= scale;
    }
}
