// Internal hooks between the kernel translation units (not part of the dispatch API).
#ifndef LM_KERNELS_INTERNAL_H
#define LM_KERNELS_INTERNAL_H

#include "kernels/kernels.h"
#include "kernels/reduce16.h"

// Adds the AVX-512 multi-token dot products (kernels_gemm_avx512.c) to a table.
void lm_kernels_avx512_fill_multi(struct lm_kernels *k);

// The AVX-512 il kernels prefetch the weight records ahead of the hardware prefetcher for
// tiles of at least this many tokens (fewer: bandwidth-bound like decode, where prefetching
// loses). It was 8 until 2026-11-25, and a 7-token tile then ran far slower than an 8-token
// one: on the default model, 2 threads, a step of 7 tokens took 10.5-12.2 ms against 8.0-10.4
// ms for 8 (1 or 4 sequences), and 7.8-9.0 ms with the prefetch. 6 tokens: the same either
// way; 5: within noise, slightly slower with it. A step of 5-7 tokens is decode with drafts,
// or 5-7 streams.
#ifndef LM_IL_PF_NT
#define LM_IL_PF_NT 6
#endif

// il layouts of q8_0 / q5_0 (kernels_il.c): bytes of one 32-element block record of a
// 16-row group, and of one block of an "xq8" activation row
#define LM_IL_Q8_0_REC (32 + 512)
#define LM_IL_Q5_0_REC (32 + 256 + 64)
#define LM_IL_XQ8_BLOCK (32 + 4 + 4 + 4)
void lm_il_gemm_q8_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas);
void lm_il_gemm_q5_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas);
void lm_il_gemm_q8_0_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas);
void lm_il_gemm_q5_0_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas);

void lm_il_gemm_f16_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas);
void lm_il_gemm_f16_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                           const void *xa, size_t xas);
void lm_il_gemv_f16_avx512(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                           const void *w, const void *xa, size_t xas);

// Row kernels (kernels.h): the scalar oracles (rows_generic.c, attn_generic.c) and the
// AVX-512 versions (rows_avx512.c, attn_avx512.c). The AVX2 table uses the generic ones.
void lm_rmsnorm_generic(float *y, const float *x, const float *w, int64_t n, float eps);
void lm_rope_generic(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot, bool neox);
void lm_geglu_generic(float *g, const float *u, int64_t n, const float *table);
void lm_swiglu_generic(float *g, const float *u, int64_t a, int64_t b, int64_t F);
void lm_f32_to_f16_generic(lm_f16 *y, const float *x, int64_t n);
void lm_attn_generic(const struct lm_attn_job *j);
void lm_topk_span_generic(struct lm_topk *t, const float *x, int32_t id0, int64_t n);
void lm_rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps);
void lm_rope_avx512(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot, bool neox);
void lm_geglu_avx512(float *g, const float *u, int64_t n, const float *table);
void lm_swiglu_avx512(float *g, const float *u, int64_t a, int64_t b, int64_t F);
void lm_f32_to_f16_avx512(lm_f16 *y, const float *x, int64_t n);
void lm_attn_avx512(const struct lm_attn_job *j);
void lm_topk_span_avx512(struct lm_topk *t, const float *x, int32_t id0, int64_t n);

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#include <string.h>
// Two q5_0 blocks -> 64 signed quants (q - 16) in one zmm, and the mask of negative ones.
static inline __attribute__((always_inline)) void
lm_q5_0_pair_avx512(const struct lm_block_q5_0 *a, const struct lm_block_q5_0 *b, __m512i *qx,
                    __mmask64 *neg) {
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b->qs),
                                       _mm_loadu_si128((const __m128i *)a->qs));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_and_si256(t, m4), hi = _mm256_and_si256(_mm256_srli_epi16(t, 4), m4);
    // [lo_a, lo_b, hi_a, hi_b] -> [lo_a, hi_a, lo_b, hi_b]: element order of each block
    const __m512i z = _mm512_shuffle_i64x2(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                           _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                           _MM_SHUFFLE(3, 1, 2, 0));
    uint32_t ha, hb;
    memcpy(&ha, a->qh, 4);
    memcpy(&hb, b->qh, 4);
    const __mmask64 k = (__mmask64)ha | ((__mmask64)hb << 32);
    const __m512i q = _mm512_mask_add_epi8(_mm512_sub_epi8(z, _mm512_set1_epi8(16)), k,
                                           _mm512_sub_epi8(z, _mm512_set1_epi8(16)), _mm512_set1_epi8(16));
    *qx = q;
    *neg = _mm512_movepi8_mask(q);
}
#endif

#endif
