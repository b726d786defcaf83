// Per-dtype traits table (GGML type ids).
#include "tensor/dtype.h"

#include <stdio.h>

static const struct lm_dtype_traits k_traits[LM_DTYPE_COUNT] = {
    [LM_DTYPE_F32] = {"f32", 1, 4, true},
    [LM_DTYPE_F16] = {"f16", 1, 2, true},
    [LM_DTYPE_Q4_0] = {"q4_0", 32, 18, true},
    [LM_DTYPE_Q4_1] = {"q4_1", 32, 20, true},
    [LM_DTYPE_Q5_0] = {"q5_0", 32, 22, true},
    [LM_DTYPE_Q5_1] = {"q5_1", 32, 24, true},
    [LM_DTYPE_Q8_0] = {"q8_0", 32, 34, true},
    [LM_DTYPE_Q8_1] = {"q8_1", 32, 36, false},
    [LM_DTYPE_Q2_K] = {"q2_K", 256, 84, true},
    [LM_DTYPE_Q3_K] = {"q3_K", 256, 110, true},
    [LM_DTYPE_Q4_K] = {"q4_K", 256, 144, true},
    [LM_DTYPE_Q5_K] = {"q5_K", 256, 176, true},
    [LM_DTYPE_Q6_K] = {"q6_K", 256, 210, true},
    [LM_DTYPE_Q8_K] = {"q8_K", 256, 292, false},
    [LM_DTYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, false},
    [LM_DTYPE_IQ2_XS] = {"iq2_xs", 256, 74, false},
    [LM_DTYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, false},
    [LM_DTYPE_IQ1_S] = {"iq1_s", 256, 50, false},
    [LM_DTYPE_IQ4_NL] = {"iq4_nl", 32, 18, true},
    [LM_DTYPE_IQ3_S] = {"iq3_s", 256, 110, false},
    [LM_DTYPE_IQ2_S] = {"iq2_s", 256, 82, false},
    [LM_DTYPE_IQ4_XS] = {"iq4_xs", 256, 136, true},
    [LM_DTYPE_I8] = {"i8", 1, 1, false},
    [LM_DTYPE_I16] = {"i16", 1, 2, false},
    [LM_DTYPE_I32] = {"i32", 1, 4, false},
    [LM_DTYPE_I64] = {"i64", 1, 8, false},
    [LM_DTYPE_F64] = {"f64", 1, 8, false},
    [LM_DTYPE_IQ1_M] = {"iq1_m", 256, 56, false},
    [LM_DTYPE_BF16] = {"bf16", 1, 2, true},
    [LM_DTYPE_TQ1_0] = {"tq1_0", 256, 54, false},
    [LM_DTYPE_TQ2_0] = {"tq2_0", 256, 66, false},
    [LM_DTYPE_MXFP4] = {"mxfp4", 32, 17, true},
};

const struct lm_dtype_traits *lm_dtype_traits(int t) {
    if (t < 0 || t >= LM_DTYPE_COUNT || k_traits[t].name == NULL) return NULL;
    return &k_traits[t];
}

const char *lm_dtype_name(int t) {
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    return tr ? tr->name : "?";
}

size_t lm_dtype_row_size(enum lm_dtype t, int64_t n) {
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    return (size_t)(n / tr->block_size) * tr->type_size;
}

const char *lm_dtype_supported_names(char *buf, size_t n) {
    size_t o = 0;
    if (n) buf[0] = 0;
    for (int t = 0; t < LM_DTYPE_COUNT && o < n; t++) {
        if (!k_traits[t].name || !k_traits[t].supported) continue;
        int w = snprintf(buf + o, n - o, "%s%s", o ? ", " : "", k_traits[t].name);
        if (w < 0) break;
        o += (size_t)w;
    }
    return buf;
}
