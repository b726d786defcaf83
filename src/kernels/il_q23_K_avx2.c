// AVX2 GEMMs on the q2_K / q3_K row-interleaved layouts (il_layout.h): one group of 16 weight
// rows (two ymm of 8 i32 lanes, rows 0-7 and 8-15) against up to LM_IL_MAX_NT q8_K tokens,
// each super-block's quants decoded once per call. Results are il_q23_K_generic.c's bit for
// bit (exact int32 per super-block, then the same per-row float steps as vec_dot).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/simd_avx2.h"

// Software prefetch of each record / super-block IL2_PF(nt) bytes ahead (il_avx512.c's
// distances, measured there): the hardware prefetcher alone falls behind here too. One token
// over 64 MB of groups (n_in 2048), 1 thread, this Zen 5 with LUMEN_ISA=avx2, shared and
// noisy: q4_K 12 -> 25-36 GB/s, q6_K 11 -> 24-32, q5_K 12 -> 21-28, q4_0 30 -> 21-43.
#define IL2_PF(nt) ((nt) >= 6 ? 1024 : 8192)
AI void il2_prefetch(const void *p, size_t bytes, size_t ahead) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + ahead + o, _MM_HINT_T0);
}

// int16 pair (a, b) as the i32 broadcast to every lane
AI __m256i q23_pair16(int16_t a, int16_t b) {
    return _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16));
}

// Per super-block, token t and row r (lane r of half h), for each sub-block pair p (columns
// 32p..32p+31): vpmaddubsw of the unsigned quants (q2_K 0..3, q3_K 0..7: |pair| <= 2 * 7 *
// 128) against the activation bytes, a sub-block's 4 vectors added in int16 (<= 7168), then
// one vpmaddwd against (sc, sc) each:
// q2_K (Q3 = 0): the mins term summs = sum_j mn bsums_j by vpmaddwd on (mn[2p], mn[2p+1])
//   first, then sum += (d * x.d) * isum - (dmin * x.d) * summs
// q3_K (Q3 = 1): the high bit ORed in as 4; -4 sum_j sc bsums_j into isum by vpmaddwd on
//   (-4 sc) pairs; sum += (d * x.d) * isum
AI void q23_K_avx2(const int Q3, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                   const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const size_t sb_bytes = Q3 ? sizeof(struct lm_il_q3_K_sb) : sizeof(struct lm_il_q2_K_sb);
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4), m4w = _mm256_set1_epi16(0x0f);
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    __m256 sum[LM_IL_MAX_NT][2], mterm[LM_IL_MAX_NT][2];
    __m256i isum[LM_IL_MAX_NT][2];
    for (int t = 0; t < nt; t++) sum[t][0] = sum[t][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const char *sbp = (const char *)wg + (size_t)i * sb_bytes;
        const struct lm_il_q2_K_sb *b2 = (const struct lm_il_q2_K_sb *)sbp;
        const struct lm_il_q3_K_sb *b3 = (const struct lm_il_q3_K_sb *)sbp;
        il2_prefetch(sbp, sb_bytes, IL2_PF(nt));
        const uint8_t(*qs)[4 * LM_IL_ROWS] = Q3 ? b3->qs : b2->qs;
        const lm_f16 *dp = Q3 ? b3->d : b2->d;
        __m256 dx[2];
        for (int h = 0; h < 2; h++) dx[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dp + 8 * h)));
        if (!Q3) { // mins first
            __m256 dm[2];
            __m256i mnv[8][2]; // lane r: (mn[2p][r], mn[2p+1][r]) as int16
            for (int h = 0; h < 2; h++) {
                dm[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b2->dmin + 8 * h)));
                for (int p = 0; p < 8; p++)
                    mnv[p][h] = _mm256_srli_epi16(
                        _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b2->sc[p][8 * h])), 4);
            }
            for (int t = 0; t < nt; t++) {
                const struct lm_block_q8_K *yb = (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
                const __m256 dmy = _mm256_set1_ps(yb->d);
                for (int h = 0; h < 2; h++) {
                    __m256i acc = _mm256_setzero_si256();
                    for (int p = 0; p < 8; p++)
                        acc = _mm256_add_epi32(
                            acc, _mm256_madd_epi16(mnv[p][h], q23_pair16(yb->bsums[2 * p], yb->bsums[2 * p + 1])));
                    mterm[t][h] = _mm256_mul_ps(_mm256_mul_ps(dm[h], dmy), _mm256_cvtepi32_ps(acc));
                }
            }
        }
        for (int t = 0; t < nt; t++) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            // q[4e + s]: columns 32p + 16e + 4s.. (sub-block 2p + e), rows 0-7 / 8-15
            __m256i q[8][2], sce[2], sco[2], scn[2];
            for (int h = 0; h < 2; h++) {
                for (int e = 0; e < 2; e++) {
                    const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs[2 * p + e] + 32 * h));
                    for (int s = 0; s < 4; s++) {
                        q[4 * e + s][h] = _mm256_and_si256(s ? _mm256_srli_epi16(raw, 2 * s) : raw, m3);
                        if (Q3) {
                            const __m256i hb = bits_to_bytes((uint32_t)(b3->qh[2 * p + e][s] >> (32 * h)));
                            q[4 * e + s][h] = _mm256_or_si256(q[4 * e + s][h], _mm256_and_si256(hb, b4));
                        }
                    }
                }
                // lane r: (sc[2p][r], sc[2p+1][r]) as int16 (q2_K: the low 4 bits of the bytes)
                const void *scb = Q3 ? (const void *)b3->sc[p][8 * h] : (const void *)b2->sc[p][8 * h];
                const __m128i raw = _mm_loadu_si128((const __m128i *)scb);
                const __m256i scv = Q3 ? _mm256_cvtepi8_epi16(raw) : _mm256_and_si256(_mm256_cvtepu8_epi16(raw), m4w);
                const __m256i e16 = _mm256_and_si256(scv, lo16), o16 = _mm256_srli_epi32(scv, 16);
                sce[h] = _mm256_or_si256(e16, _mm256_slli_epi32(e16, 16));
                sco[h] = _mm256_or_si256(o16, _mm256_slli_epi32(o16, 16));
                scn[h] = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), scv), 2); // q3_K: -4 sc
            }
            for (int t = 0; t < nt; t++) {
                const struct lm_block_q8_K *yb = (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
                const int8_t *yq = yb->qs + 32 * p;
                __m256i xb[8];
                for (int u = 0; u < 8; u++) {
                    int32_t a;
                    memcpy(&a, yq + 4 * u, 4);
                    xb[u] = _mm256_set1_epi32(a);
                }
                for (int h = 0; h < 2; h++) {
                    __m256i se = _mm256_maddubs_epi16(q[0][h], xb[0]), so = _mm256_maddubs_epi16(q[4][h], xb[4]);
                    for (int s = 1; s < 4; s++) {
                        se = _mm256_add_epi16(se, _mm256_maddubs_epi16(q[s][h], xb[s]));
                        so = _mm256_add_epi16(so, _mm256_maddubs_epi16(q[4 + s][h], xb[4 + s]));
                    }
                    __m256i s = _mm256_add_epi32(_mm256_madd_epi16(se, sce[h]), _mm256_madd_epi16(so, sco[h]));
                    if (Q3) { // - 4 (sc[2p] bsums[2p] + sc[2p+1] bsums[2p+1])
                        const __m256i bsp = q23_pair16(yb->bsums[2 * p], yb->bsums[2 * p + 1]);
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(scn[h], bsp));
                    }
                    isum[t][h] = _mm256_add_epi32(isum[t][h], s);
                }
            }
        }
        for (int t = 0; t < nt; t++) {
            const __m256 yd = _mm256_set1_ps(((const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i)->d);
            for (int h = 0; h < 2; h++) {
                const __m256 a = _mm256_mul_ps(_mm256_mul_ps(dx[h], yd), _mm256_cvtepi32_ps(isum[t][h]));
                sum[t][h] = _mm256_add_ps(sum[t][h], Q3 ? a : _mm256_sub_ps(a, mterm[t][h]));
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, sum[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, sum[t][1]);
    }
}

void lm_il_gemm_q2_K_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    q23_K_avx2(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q3_K_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    q23_K_avx2(1, n_in, nt, y, ys, wg, xa, xas);
}

#endif
