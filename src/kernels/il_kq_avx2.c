// AVX2 GEMMs on the q4_K / q5_K / q6_K row-interleaved layouts (il_layout.h): one group of 16
// weight rows (two ymm of 8 i32 lanes, rows 0-7 and 8-15) against up to LM_IL_MAX_NT q8_K
// tokens, each super-block's quants decoded once per call. Results are il_generic.c's bit for
// bit (exact int32 per super-block, then vec_dot's per-row float steps, lane by lane).
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

AI const struct lm_block_q8_K *q8K_blk(const void *xa, size_t xas, int t, int64_t i) {
    return (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
}

// int16 pair (a, b) as the i32 broadcast to every lane
AI __m256i pair16(int16_t a, int16_t b) {
    return _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16));
}

// lanes of int16 pairs (e, o) -> (e, e) and (o, o)
AI __m256i dup_lo16(__m256i v) {
    const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
    return _mm256_or_si256(lo, _mm256_slli_epi32(lo, 16));
}
AI __m256i dup_hi16(__m256i v) {
    const __m256i hi = _mm256_srli_epi32(v, 16);
    return _mm256_or_si256(hi, _mm256_slli_epi32(hi, 16));
}

// ============================================================================
// q4_K / q5_K: per super-block, token t and row r (lane r of half h):
//   isum  = sum_j sc[j][r] * dot(q[r][32j..], x[32j..])
//   summs = sum_j mn[j][r] * (bsums[2j] + bsums[2j+1])
//   sum  += (d * x.d) * (float)isum - (dmin * x.d) * (float)summs
// vpmaddubsw int16 pairs: q4_K |pair| <= 2 * 15 * 128 = 3840, so a sub-block's 8 vectors add
// up in int16 (<= 30720) and one vpmaddwd against (sc, sc) scales them; q5_K (0..31) |pair|
// <= 7936: two sums of 4. The mins: vpmaddwd of (mn[2p], mn[2p+1]) against pair sums of bsums.
// ============================================================================

AI void q45_K_avx2(const int Q5, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                   const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const size_t sb_bytes = Q5 ? sizeof(struct lm_il_q5_K_sb) : sizeof(struct lm_il_q4_K_sb);
    const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);
    __m256 sum[LM_IL_MAX_NT][2], mterm[LM_IL_MAX_NT][2];
    __m256i isum[LM_IL_MAX_NT][2];
    for (int t = 0; t < nt; t++) sum[t][0] = sum[t][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q4_K_sb *b = (const struct lm_il_q4_K_sb *)((const char *)wg + (size_t)i * sb_bytes);
        const uint64_t *qh = Q5 ? &((const struct lm_il_q5_K_sb *)b)->qh[0][0] : NULL;
        il2_prefetch(b, sb_bytes, IL2_PF(nt));
        __m256 dx[2], dm[2];
        __m256i mnv[4][2]; // lane r: (mn[2p][r], mn[2p+1][r]) as int16
        for (int h = 0; h < 2; h++) {
            dx[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->d + 8 * h)));
            dm[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->dmin + 8 * h)));
            for (int p = 0; p < 4; p++) mnv[p][h] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b->mn[p][8 * h]));
        }
        for (int t = 0; t < nt; t++) {
            const struct lm_block_q8_K *yb = q8K_blk(xa, xas, t, i);
            int16_t s2[8]; // bsums[2j] + bsums[2j+1] (|.| <= 32 * 128: exact in int16)
            for (int j = 0; j < 8; j++) s2[j] = (int16_t)(yb->bsums[2 * j] + yb->bsums[2 * j + 1]);
            const __m256 dmy = _mm256_set1_ps(yb->d);
            for (int h = 0; h < 2; h++) {
                __m256i acc = _mm256_setzero_si256();
                for (int p = 0; p < 4; p++)
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(mnv[p][h], pair16(s2[2 * p], s2[2 * p + 1])));
                mterm[t][h] = _mm256_mul_ps(_mm256_mul_ps(dm[h], dmy), _mm256_cvtepi32_ps(acc));
                isum[t][h] = _mm256_setzero_si256();
            }
        }
        for (int j = 0; j < 8; j++) {
            // lo[v] = columns 32j + 4v.., hi[v] = 32j + 16 + 4v.., rows 0-7 / 8-15
            __m256i lo[4][2], hi[4][2], scv[2];
            for (int h = 0; h < 2; h++) {
                for (int v = 0; v < 4; v++) {
                    const __m256i raw = _mm256_loadu_si256((const __m256i *)(b->qs[j][v] + 32 * h));
                    lo[v][h] = _mm256_and_si256(raw, m4);
                    hi[v][h] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                    if (Q5) {
                        const __m256i bl = bits_to_bytes((uint32_t)(qh[8 * j + v] >> (32 * h)));
                        const __m256i bh = bits_to_bytes((uint32_t)(qh[8 * j + 4 + v] >> (32 * h)));
                        lo[v][h] = _mm256_or_si256(lo[v][h], _mm256_and_si256(bl, b16));
                        hi[v][h] = _mm256_or_si256(hi[v][h], _mm256_and_si256(bh, b16));
                    }
                }
                uint64_t sc8;
                memcpy(&sc8, b->sc[j] + 8 * h, 8);
                const __m256i s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc8));
                scv[h] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16)); // (sc, sc)
            }
            for (int t = 0; t < nt; t++) {
                const int8_t *yq = q8K_blk(xa, xas, t, i)->qs + 32 * j;
                __m256i xl[4], xh[4];
                for (int v = 0; v < 4; v++) {
                    int32_t a, c;
                    memcpy(&a, yq + 4 * v, 4);
                    memcpy(&c, yq + 16 + 4 * v, 4);
                    xl[v] = _mm256_set1_epi32(a);
                    xh[v] = _mm256_set1_epi32(c);
                }
                for (int h = 0; h < 2; h++) {
                    __m256i sa = _mm256_maddubs_epi16(lo[0][h], xl[0]), sb = _mm256_maddubs_epi16(hi[0][h], xh[0]);
                    for (int v = 1; v < 4; v++) {
                        sa = _mm256_add_epi16(sa, _mm256_maddubs_epi16(lo[v][h], xl[v]));
                        sb = _mm256_add_epi16(sb, _mm256_maddubs_epi16(hi[v][h], xh[v]));
                    }
                    __m256i d;
                    if (Q5) d = _mm256_add_epi32(_mm256_madd_epi16(sa, scv[h]), _mm256_madd_epi16(sb, scv[h]));
                    else d = _mm256_madd_epi16(_mm256_add_epi16(sa, sb), scv[h]);
                    isum[t][h] = _mm256_add_epi32(isum[t][h], d);
                }
            }
        }
        for (int t = 0; t < nt; t++) {
            const __m256 yd = _mm256_set1_ps(q8K_blk(xa, xas, t, i)->d);
            for (int h = 0; h < 2; h++) {
                const __m256 a = _mm256_mul_ps(_mm256_mul_ps(dx[h], yd), _mm256_cvtepi32_ps(isum[t][h]));
                sum[t][h] = _mm256_add_ps(sum[t][h], _mm256_sub_ps(a, mterm[t][h]));
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, sum[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, sum[t][1]);
    }
}

void lm_il_gemm_q4_K_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    q45_K_avx2(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_K_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    q45_K_avx2(1, n_in, nt, y, ys, wg, xa, xas);
}

// ============================================================================
// q6_K: quants stored unsigned (0..63), so per super-block, token t and row r:
//   isum = sum_j sc[j][r] * dot(q[r][16j..], x[16j..]) - 32 * sum_j sc[j][r] * bsums[j]
//   sum += (d * x.d) * (float)isum
// |pair| <= 2 * 63 * 128 = 16128: two vpmaddubsw results add up in int16, so a 16-column
// sub-block is two vpmaddwd against (sc, sc); the correction one vpmaddwd of (-32 sc) pairs.
// ============================================================================

void lm_il_gemm_q6_K_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const struct lm_il_q6_K_sb *w = wg;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), neg32 = _mm256_set1_epi16(-32);
    __m256 sum[LM_IL_MAX_NT][2];
    __m256i isum[LM_IL_MAX_NT][2];
    for (int t = 0; t < nt; t++) sum[t][0] = sum[t][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q6_K_sb *b = &w[i];
        il2_prefetch(b, sizeof *b, IL2_PF(nt));
        for (int t = 0; t < nt; t++) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            const struct lm_il_q6_K_pair *qp = &b->q[p];
            __m256i q[8][2], sce[2], sco[2], scn[2]; // q[u]: columns 32p + 4u.. (0..63)
            for (int h = 0; h < 2; h++) {
                // lane r: (sc[2p][r], sc[2p+1][r]) as int16
                const __m256i scp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->sc[p][8 * h]));
                sce[h] = dup_lo16(scp);
                sco[h] = dup_hi16(scp);
                scn[h] = _mm256_mullo_epi16(scp, neg32);
                // low 4 bits from ql's nibbles, high 2 bits moved from qh to bits 4-5 (epi16
                // shifts: neighbours' bits only land outside 0x30)
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i qhv = _mm256_loadu_si256((const __m256i *)(qp->qh[hh] + 32 * h));
                    const __m256i hs[4] = {_mm256_slli_epi16(qhv, 4), _mm256_slli_epi16(qhv, 2), qhv,
                                           _mm256_srli_epi16(qhv, 2)};
                    for (int s = 0; s < 4; s++) {
                        const __m256i ql = _mm256_loadu_si256((const __m256i *)(qp->ql[s] + 32 * h));
                        const __m256i lo = _mm256_and_si256(hh ? _mm256_srli_epi16(ql, 4) : ql, m4);
                        q[4 * hh + s][h] = _mm256_or_si256(lo, _mm256_and_si256(hs[s], m30));
                    }
                }
            }
            for (int t = 0; t < nt; t++) {
                const struct lm_block_q8_K *yb = q8K_blk(xa, xas, t, i);
                const int8_t *yq = yb->qs + 32 * p;
                __m256i xb[8];
                for (int u = 0; u < 8; u++) {
                    int32_t a;
                    memcpy(&a, yq + 4 * u, 4);
                    xb[u] = _mm256_set1_epi32(a);
                }
                const __m256i bsp = pair16(yb->bsums[2 * p], yb->bsums[2 * p + 1]);
                for (int h = 0; h < 2; h++) {
                    __m256i m[8];
                    for (int u = 0; u < 8; u++) m[u] = _mm256_maddubs_epi16(q[u][h], xb[u]);
                    const __m256i e0 = _mm256_add_epi16(m[0], m[1]), e1 = _mm256_add_epi16(m[2], m[3]);
                    const __m256i o0 = _mm256_add_epi16(m[4], m[5]), o1 = _mm256_add_epi16(m[6], m[7]);
                    __m256i s = _mm256_add_epi32(isum[t][h], _mm256_madd_epi16(scn[h], bsp));
                    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_madd_epi16(e0, sce[h]), _mm256_madd_epi16(e1, sce[h])));
                    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_madd_epi16(o0, sco[h]), _mm256_madd_epi16(o1, sco[h])));
                    isum[t][h] = s;
                }
            }
        }
        for (int t = 0; t < nt; t++) {
            const __m256 yd = _mm256_set1_ps(q8K_blk(xa, xas, t, i)->d);
            for (int h = 0; h < 2; h++) {
                const __m256 dv = _mm256_loadu_ps(b->d + 8 * h);
                sum[t][h] = _mm256_add_ps(sum[t][h], _mm256_mul_ps(_mm256_mul_ps(dv, yd), _mm256_cvtepi32_ps(isum[t][h])));
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, sum[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, sum[t][1]);
    }
}

#endif
