// AVX-512 VNNI kernels of mxfp4: the dot products (mxfp4_x86.h's body with vpdpbusd) and the
// il GEMM (its own records, il_layout.h: each code looked up as kv + 128 by one vpshufb, the
// + 128 undone through the activations' -128 sum, as iq4_avx512.c does). Bit-identical to
// mxfp4_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)

#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/mxfp4_x86.h"
#include "kernels/simd_avx512.h"

LM_DEF_DOT_MXFP4(avx512, dot_i8i8_vnni)

// 16 E8M0 bytes -> 16 floats lm_e8m0_half(e), exactly as the scalar fact
AI __m512 e8m0_half16(const uint8_t *e16) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e16));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, norm, sub));
}

// ---- il GEMM: one group (16 rows) x NT tokens; per token and block exact int32 for the 16
// rows, then fma(d_x * d_w, isum, acc) in block order. Prefetch as iq4_avx512.c.
#define MXFP4_PF(NT) ((NT) >= 6 ? 1024 : 8192)

AI void il_mxfp4_n(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                   size_t xas) {
    const int64_t nb = n_in / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int8_t t128[16];
    for (int i = 0; i < 16; i++) t128[i] = (int8_t)(lm_kvalues_mxfp4[i] + 128);
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t128));
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * LM_IL_MXFP4_REC;
        for (size_t o = 0; o < LM_IL_MXFP4_REC; o += 64) _mm_prefetch((const char *)r + MXFP4_PF(NT) + o, _MM_HINT_T0);
        const __m512 dw = e8m0_half16(r);
        __m512i wv[8];
        for (int j = 0; j < 4; j++) {
            const __m512i v = _mm512_loadu_si512((const void *)(r + 16 + 64 * j));
            wv[2 * j] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
            wv[2 * j + 1] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        for (int t = 0; t < NT; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            __m512i s0 = _mm512_set1_epi32(((const int32_t *)(xt + nb * 36))[nb + b]);
            if (NT <= 2) { // few tokens: two dependency chains per block
                __m512i s1 = _mm512_setzero_si512();
                for (int g = 0; g < 4; g++) {
                    s0 = _mm512_dpbusd_epi32(s0, wv[g], bcast4(q + 4 * g));
                    s1 = _mm512_dpbusd_epi32(s1, wv[g + 4], bcast4(q + 4 * g + 16));
                }
                s0 = _mm512_add_epi32(s0, s1);
            } else {
                for (int g = 0; g < 8; g++) s0 = _mm512_dpbusd_epi32(s0, wv[g], bcast4(q + 4 * g));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dx), dw), _mm512_cvtepi32_ps(s0), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define MXFP4_CASE(n) case n: il_mxfp4_n(n, n_in, y, ys, wg, xa, xas); break;

void lm_il_gemm_mxfp4_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    switch (nt) {
        MXFP4_CASE(1) MXFP4_CASE(2) MXFP4_CASE(3) MXFP4_CASE(4) MXFP4_CASE(5) MXFP4_CASE(6)
        MXFP4_CASE(7) MXFP4_CASE(8) MXFP4_CASE(9) MXFP4_CASE(10) MXFP4_CASE(11) MXFP4_CASE(12)
        MXFP4_CASE(13) MXFP4_CASE(14) MXFP4_CASE(15)
        default: il_mxfp4_n(16, n_in, y, ys, wg, xa, xas); break;
    }
}

#endif
