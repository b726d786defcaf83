// The il layouts of q4_1 and q5_1 (il_layout.h): packing 16 ggml rows into one group at load,
// and the "xq81" activation rows their il kernels read, made from a q8_1 row. il_pack.c
// dispatches here; the kernels are il_q1_generic.c and il_q1_avx512.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// the 16 quant bytes of a q4_1 / q5_1 block -> row r's bytes of the record's 4 nibble vectors
// q (il_pack.c's q4_0 / q5_0 nibble order): byte kk of vector j holds element 8j + kk in its
// low nibble and 8j + 4 + kk in its high one; ggml keeps element e < 16 in the low nibble
// of qs[e] and e >= 16 in the high nibble of qs[e - 16]
static void pack_nibbles(uint8_t *q, const uint8_t *qs, int r) {
    for (int j = 0; j < 4; j++) {
        uint32_t a, c;
        memcpy(&a, qs + 8 * (j % 2), 4);
        memcpy(&c, qs + 8 * (j % 2) + 4, 4);
        const int sh = j < 2 ? 0 : 4;
        const uint32_t v = ((a >> sh) & 0x0f0f0f0fu) | ((c >> sh) & 0x0f0f0f0fu) << 4;
        memcpy(q + j * 64 + r * 4, &v, 4);
    }
}

// LM_IL_ROWS rows at src (row_bytes apart) -> one group at dst; row by row, as il_pack.c's
// packers (the source is one sequential stream)
void lm_il_pack_q1(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    const int q5 = t == LM_DTYPE_Q5_1;
    LM_ASSERT((t == LM_DTYPE_Q4_1 || q5) && n_in % 32 == 0);
    const size_t rec_bytes = q5 ? LM_IL_Q5_1_REC : LM_IL_Q4_1_REC;
    uint8_t *out = dst;
    if (q5)
        for (int64_t b = 0; b < n_in / 32; b++) memset(out + (size_t)b * rec_bytes + 64 + 256, 0, 64);
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const uint8_t *row = (const uint8_t *)src + (size_t)r * row_bytes;
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *rec = out + (size_t)b * rec_bytes;
            if (q5) {
                const struct lm_block_q5_1 *x = (const struct lm_block_q5_1 *)row + b;
                memcpy(rec + 2 * r, &x->d, 2);
                memcpy(rec + 32 + 2 * r, &x->m, 2);
                pack_nibbles(rec + 64, x->qs, r);
                uint32_t qh;
                memcpy(&qh, x->qh, 4);
                for (int g = 0; g < 8; g++) { // bit 4 of elements 4g..4g+3 -> bits 4r.. of u64 g
                    uint64_t h;
                    memcpy(&h, rec + 64 + 256 + 8 * g, 8);
                    h |= (uint64_t)((qh >> (4 * g)) & 0x0f) << (r * 4);
                    memcpy(rec + 64 + 256 + 8 * g, &h, 8);
                }
            } else {
                const struct lm_block_q4_1 *x = (const struct lm_block_q4_1 *)row + b;
                memcpy(rec + 2 * r, &x->d, 2);
                memcpy(rec + 32 + 2 * r, &x->m, 2);
                pack_nibbles(rec + 64, x->qs, r);
            }
        }
    }
}

// q8_1 row (n_in) -> xq81: the quants, then the scales d and the sums s widened to float
void lm_il_act_q81(const void *xq, int64_t n_in, void *xa) {
    const struct lm_block_q8_1 *y = xq;
    const int64_t nb = n_in / 32;
    int8_t *qs = xa;
    float *d = (float *)(qs + nb * 32), *s = d + nb;
    for (int64_t b = 0; b < nb; b++) {
        memcpy(qs + b * 32, y[b].qs, 32);
        d[b] = lm_f16_to_f32(y[b].d);
        s[b] = lm_f16_to_f32(y[b].s);
    }
}
