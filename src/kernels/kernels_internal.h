// Internal hooks between the kernel translation units (not part of the dispatch API).
#ifndef LM_KERNELS_INTERNAL_H
#define LM_KERNELS_INTERNAL_H

#include <math.h>

#include "kernels/kernels.h"

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

// ---- Float orders the vector kernels reproduce, stated as scalar code (the _generic kernels
// use these; the vector forms are in simd_avx2.h and simd_avx512.h)

// 16 lane sums -> one float in the add tree of GCC's _mm512_reduce_add_ps: s[i] = a[i+8] +
// a[i], then s[i+4] + s[i], then (s0 + s2) + (s1 + s3). Float addition commutes, so only the
// tree's shape matters. Vector forms: _mm512_reduce_add_ps, tree16_ymm, lm_reduce_add16.
static inline float lm_tree16(const float *a) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) s4[i] = s8[i + 4] + s8[i];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// exp(x) as ggml_v_expf computes it (range reduction x = n ln2 + b, 2^n * poly(b), its
// constants), one lane of lm_expf_ggml_512: every fma of the vector form is an fmaf here,
// and _mm512_scalef_ps(j, n) (n integral when |n| <= 192) is ldexpf, both correctly rounded.
static inline float lm_expf_ggml(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (n != n) return j; // x is NaN: so is j (scalef returns it)
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n);
}

#endif
