// Packing of q2_K / q3_K weights into their row-interleaved layouts at load (il_layout.h):
// 16 ggml rows -> one group of super-block structs. ISA-independent; lm_il_pack_group calls it.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// the low 2 bits of u[256] (row r) -> qs[j][4r + kk], bits 2s.. = column 16j + 4s + kk
static void pack_low2(uint8_t qs[16][4 * LM_IL_ROWS], int r, const int8_t *u) {
    for (int j = 0; j < 16; j++)
        for (int kk = 0; kk < 4; kk++) {
            int v = 0;
            for (int s = 0; s < 4; s++) v |= (u[16 * j + 4 * s + kk] & 3) << (2 * s);
            qs[j][4 * r + kk] = (uint8_t)v;
        }
}

// Rows are walked one after another (one sequential stream of the file, as il_pack.c's).
void lm_il_pack_q2_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    for (int r = 0; r < LM_IL_ROWS; r++)
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_q2_K_sb *o = (struct lm_il_q2_K_sb *)dst + i;
            const struct lm_block_q2_K *b = (const struct lm_block_q2_K *)((const char *)src + r * row_bytes) + i;
            int8_t q[LM_QK_K];
            uint8_t sc[16], mn[16];
            lm_q2_K_unpack(b, q, sc, mn);
            o->d[r] = b->d;
            o->dmin[r] = b->dmin;
            for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = b->scales[j];
            pack_low2(o->qs, r, q);
        }
}

void lm_il_pack_q3_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) memset(((struct lm_il_q3_K_sb *)dst)[i].qh, 0, 512);
    for (int r = 0; r < LM_IL_ROWS; r++)
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_q3_K_sb *o = (struct lm_il_q3_K_sb *)dst + i;
            const struct lm_block_q3_K *b = (const struct lm_block_q3_K *)((const char *)src + r * row_bytes) + i;
            int8_t q[LM_QK_K], sc[16];
            lm_q3_K_unpack(b, q, sc);
            for (int e = 0; e < LM_QK_K; e++) q[e] = (int8_t)(q[e] + 4); // u = q + 4 in 0..7
            o->d[r] = b->d;
            for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = sc[j];
            pack_low2(o->qs, r, q);
            for (int j = 0; j < 16; j++)
                for (int s = 0; s < 4; s++) {
                    uint64_t h = 0;
                    for (int kk = 0; kk < 4; kk++) h |= (uint64_t)((q[16 * j + 4 * s + kk] >> 2) & 1) << kk;
                    o->qh[j][s] |= h << (4 * r);
                }
        }
}
