// Kernel dispatch: which activation type each weight dtype's dot product consumes, the
// choice of ISA table (cpuid + LUMEN_FORCE_GENERIC / LUMEN_ISA), and the row loop.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/kernels.h"

enum lm_dtype lm_vec_dot_type(enum lm_dtype t) {
    switch (t) {
    case LM_DTYPE_F32: return LM_DTYPE_F32;
    case LM_DTYPE_F16: return LM_DTYPE_F16;
    case LM_DTYPE_BF16: return LM_DTYPE_BF16;
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_Q5_0:
    case LM_DTYPE_Q8_0: return LM_DTYPE_Q8_0;
    case LM_DTYPE_Q4_1:
    case LM_DTYPE_Q5_1: return LM_DTYPE_Q8_1;
    case LM_DTYPE_Q2_K:
    case LM_DTYPE_Q3_K:
    case LM_DTYPE_Q4_K:
    case LM_DTYPE_Q5_K:
    case LM_DTYPE_Q6_K: return LM_DTYPE_Q8_K;
    default: return LM_DTYPE_COUNT; // no dot product for this dtype
    }
}

static const char *g_reason = "cpu_feature";

const char *lm_kernels_reason(void) { return g_reason; }

const struct lm_kernels *lm_kernels_pick(void) {
    const char *fg = getenv("LUMEN_FORCE_GENERIC");
    if (fg && fg[0] && strcmp(fg, "0") != 0) {
        g_reason = "forced LUMEN_FORCE_GENERIC=1";
        return lm_kernels_generic();
    }
    const char *isa = getenv("LUMEN_ISA");
    if (isa && isa[0]) {
        const struct lm_kernels *k = NULL;
        g_reason = "forced LUMEN_ISA";
        if (strcmp(isa, "generic") == 0) return lm_kernels_generic();
        if (strcmp(isa, "avx2") == 0) {
            k = lm_kernels_avx2();
        } else if (strcmp(isa, "avx512") == 0) {
            k = lm_kernels_avx512();
        } else {
            fprintf(stderr, "lumen: LUMEN_ISA='%s' is not one of generic|avx2|avx512; using the best available\n", isa);
        }
        if (k) return k;
        g_reason = "cpu_feature (LUMEN_ISA not available)";
        if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0)
            fprintf(stderr, "lumen: LUMEN_ISA=%s: not supported by this CPU; using the best available\n", isa);
    }
    const struct lm_kernels *k = lm_kernels_avx512();
    if (k) { g_reason = "cpu_feature avx512f+bw+vl+dq+vnni"; return k; }
    k = lm_kernels_avx2();
    if (k) { g_reason = "cpu_feature avx2+fma+f16c (no avx512 vnni)"; return k; }
    g_reason = "no avx2 on this cpu";
    return lm_kernels_generic();
}

static const struct lm_kernels *g_best;
static pthread_once_t g_best_once = PTHREAD_ONCE_INIT;
static void best_init(void) { g_best = lm_kernels_pick(); }

const struct lm_kernels *lm_kernels_best(void) {
    pthread_once(&g_best_once, best_init);
    return g_best;
}

// W (n_rows, n_in) @ xq (n_in) -> y (r1 - r0), rows [r0, r1)
void lm_matvec_rows(const struct lm_kernels *k, enum lm_dtype t, const void *W, size_t row_bytes,
                    int64_t n_in, const void *xq, float *y, int64_t r0, int64_t r1) {
    lm_vec_dot_fn dot = k->vec_dot[t];
    LM_ASSERT(dot != NULL);
    const char *w = (const char *)W;
    for (int64_t r = r0; r < r1; r++) dot(n_in, &y[r - r0], w + (size_t)r * row_bytes, xq);
}

void lm_q8_0_repack_u8(const void *xq, int64_t n, uint8_t *xu, float *dyv) {
    const struct lm_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    for (int64_t i = 0; i < nb; i++) {
        for (int j = 0; j < 32; j++) xu[i * 32 + j] = (uint8_t)(y[i].qs[j] + 128);
        const float d = lm_f16_to_f32(y[i].d);
        float *v = dyv + (i / 2) * 16 + (i % 2) * 8;
        for (int j = 0; j < 8; j++) v[j] = d;
    }
    if (nb % 2)
        for (int j = 0; j < 8; j++) dyv[(nb / 2) * 16 + 8 + j] = 0.0f;
}
