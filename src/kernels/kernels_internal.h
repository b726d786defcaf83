// Internal to kernels/: the kernel functions of every concern and ISA, listed by file, that
// the dispatch tables (kernels.c) assemble, and the scalar statements of the float orders the
// vector kernels reproduce. Not part of the dispatch API (kernels.h).
//
// Every kernel file opens with #pragma GCC optimize("fp-contract=off") before its includes
// (so that the headers' inline helpers get it too): GCC would otherwise fuse d*q - m into an
// FMA under -march=native, and dequantized values must match llama.cpp / gguf-py (which round
// the product first) and every table must give the same bits. Only the fmaf / _mm*_fmadd
// written in the code fuse.
#ifndef LM_KERNELS_INTERNAL_H
#define LM_KERNELS_INTERNAL_H

#include <math.h>

#include "kernels/kernels.h"

// The kernel types, one per entry of struct lm_kernels (kernels.h states each contract).
typedef void lm_dequant_kernel(const void *x, float *y, int64_t n);
typedef void lm_quant_kernel(const float *x, void *y, int64_t n);
typedef void lm_vec_dot_kernel(int64_t n, float *s, const void *w, const void *xq);
typedef void lm_vec_dot_n_kernel(int64_t n, int nt, float *s, size_t ss, const void *w,
                                 const void *xq, size_t xs);
typedef void lm_vec_dot_n_u8_kernel(int64_t n, int nt, float *s, size_t ss, const void *w,
                                    const uint8_t *xu, size_t xus, const float *dyv, size_t dys);
typedef void lm_il_gemm_kernel(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                               const void *xa, size_t xas);
typedef void lm_il_gemv_kernel(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                               const void *w, const void *xa, size_t xas);

// ---- quant_generic.c, quant_avx2.c: dequantize a weight row, quantize an activation row
lm_dequant_kernel lm_dequant_f32_generic, lm_dequant_f16_generic, lm_dequant_bf16_generic,
    lm_dequant_q4_0_generic, lm_dequant_q4_1_generic, lm_dequant_q5_0_generic,
    lm_dequant_q5_1_generic, lm_dequant_q8_0_generic, lm_dequant_q2_K_generic,
    lm_dequant_q3_K_generic, lm_dequant_q4_K_generic, lm_dequant_q5_K_generic,
    lm_dequant_q6_K_generic;
lm_quant_kernel lm_quant_f32_generic, lm_quant_f16_generic, lm_quant_bf16_generic,
    lm_quant_q8_0_generic, lm_quant_q8_1_generic, lm_quant_q8_K_generic;
lm_dequant_kernel lm_dequant_f16_avx2, lm_dequant_q8_0_avx2, lm_dequant_q5_0_avx2,
    lm_dequant_q4_K_avx2, lm_dequant_q6_K_avx2;
lm_quant_kernel lm_quant_f16_avx2, lm_quant_q8_0_avx2, lm_quant_q8_K_avx2;

// ---- dot_generic.c, dot_avx2.c, dot_avx512.c: one weight row . one activation row
lm_vec_dot_kernel lm_vec_dot_f32_generic, lm_vec_dot_f16_generic, lm_vec_dot_bf16_generic,
    lm_vec_dot_q4_0_generic, lm_vec_dot_q4_1_generic, lm_vec_dot_q5_0_generic,
    lm_vec_dot_q5_1_generic, lm_vec_dot_q8_0_generic, lm_vec_dot_q2_K_generic,
    lm_vec_dot_q3_K_generic, lm_vec_dot_q4_K_generic, lm_vec_dot_q5_K_generic,
    lm_vec_dot_q6_K_generic;
lm_vec_dot_kernel lm_vec_dot_f32_avx2, lm_vec_dot_f16_avx2, lm_vec_dot_bf16_avx2,
    lm_vec_dot_q4_0_avx2, lm_vec_dot_q4_1_avx2, lm_vec_dot_q5_0_avx2, lm_vec_dot_q5_1_avx2,
    lm_vec_dot_q8_0_avx2, lm_vec_dot_q4_K_avx2, lm_vec_dot_q5_K_avx2, lm_vec_dot_q6_K_avx2;
lm_vec_dot_kernel lm_vec_dot_f32_avx512, lm_vec_dot_f16_avx512, lm_vec_dot_q4_0_avx512,
    lm_vec_dot_q5_0_avx512, lm_vec_dot_q8_0_avx512, lm_vec_dot_q4_K_avx512,
    lm_vec_dot_q5_K_avx512, lm_vec_dot_q6_K_avx512;

// ---- gemm_avx512.c: one weight row . up to 8 activation rows (the generic table has none)
lm_vec_dot_n_kernel lm_vec_dot_n_f16_avx512, lm_vec_dot_n_q8_0_avx512, lm_vec_dot_n_q5_0_avx512,
    lm_vec_dot_n_q4_K_avx512, lm_vec_dot_n_q6_K_avx512;
lm_vec_dot_n_u8_kernel lm_vec_dot_n_u8_q5_0_avx512, lm_vec_dot_n_u8_q8_0_avx512;
// ---- dot_q23_K_avx2.c, dot_q23_K_avx512.c: q2_K / q3_K x q8_K (vec_dot, vec_dot_n)
lm_vec_dot_kernel lm_vec_dot_q2_K_avx2, lm_vec_dot_q3_K_avx2, lm_vec_dot_q2_K_avx512,
    lm_vec_dot_q3_K_avx512;
lm_vec_dot_n_kernel lm_vec_dot_n_q2_K_avx512, lm_vec_dot_n_q3_K_avx512;

// ---- dot_q1_avx2.c, dot_q1_avx512.c: q4_1 / q5_1 vec_dot and vec_dot_n (bit-identical to generic)
lm_vec_dot_n_kernel lm_vec_dot_n_q4_1_avx2, lm_vec_dot_n_q5_1_avx2, lm_vec_dot_n_q4_1_avx512,
    lm_vec_dot_n_q5_1_avx512;
lm_vec_dot_kernel lm_vec_dot_q4_1_avx512, lm_vec_dot_q5_1_avx512;
lm_quant_kernel lm_quant_q8_1_avx2; // quant_q1_avx2.c

// ---- il_generic.c, il_avx2.c, il_avx512.c: one il group of 16 rows . up to 16 activation rows
lm_il_gemm_kernel lm_il_gemm_q8_0_generic, lm_il_gemm_q5_0_generic, lm_il_gemm_q4_0_generic,
    lm_il_gemm_q4_K_generic, lm_il_gemm_q5_K_generic,
    lm_il_gemm_q6_K_generic, lm_il_gemm_f16_generic;
lm_il_gemm_kernel lm_il_gemm_f16_avx2;
lm_il_gemm_kernel lm_il_gemm_q8_0_avx512, lm_il_gemm_q5_0_avx512, lm_il_gemm_q4_0_avx512,
    lm_il_gemm_q4_K_avx512, lm_il_gemm_q5_K_avx512,
    lm_il_gemm_q6_K_avx512, lm_il_gemm_f16_avx512;
lm_il_gemv_kernel lm_il_gemv_f16_avx512;
// ---- il_q23_K_pack.c, il_q23_K_generic.c, il_q23_K_avx512.c: q2_K / q3_K il groups
void lm_il_pack_q2_K(void *dst, const void *src, size_t row_bytes, int64_t n_in);
void lm_il_pack_q3_K(void *dst, const void *src, size_t row_bytes, int64_t n_in);
lm_il_gemm_kernel lm_il_gemm_q2_K_generic, lm_il_gemm_q3_K_generic, lm_il_gemm_q2_K_avx512,
    lm_il_gemm_q3_K_avx512;
// ---- il_q1_generic.c, il_q1_avx2.c, il_q1_avx512.c: the q4_1 / q5_1 il GEMMs
lm_il_gemm_kernel lm_il_gemm_q4_1_generic, lm_il_gemm_q5_1_generic;
lm_il_gemm_kernel lm_il_gemm_q4_1_avx512, lm_il_gemm_q5_1_avx512;
lm_il_gemm_kernel lm_il_gemm_q4_1_avx2, lm_il_gemm_q5_1_avx2; // il_q1_avx2.c
// ---- il_avx2.c, il_kq_avx2.c, il_q23_K_avx2.c: the other il GEMMs of the AVX2 table
lm_il_gemm_kernel lm_il_gemm_q8_0_avx2, lm_il_gemm_q5_0_avx2, lm_il_gemm_q4_0_avx2,
    lm_il_gemm_q4_K_avx2, lm_il_gemm_q5_K_avx2, lm_il_gemm_q6_K_avx2, lm_il_gemm_q2_K_avx2,
    lm_il_gemm_q3_K_avx2;
// ---- il_amx.c: AMX-INT8 k-quant GEMMs (prefill); lm_amx_enable asks Linux for the tile state
// and says whether the CPU and kernel allow AMX (1) or not (0)
typedef void lm_il_gemm_amx_kernel(int64_t n_in, int64_t n_groups, size_t group_bytes, int64_t nt,
                                   float *y, size_t ys, const void *wg, const void *xt);
lm_il_gemm_amx_kernel lm_il_gemm_amx_q4_K, lm_il_gemm_amx_q5_K, lm_il_gemm_amx_q6_K;
int lm_amx_enable(void);

// ---- iq4_generic.c, iq4_avx2.c, iq4_avx512.c: iq4_nl / iq4_xs dequant, dots, iq4_nl il GEMM
lm_dequant_kernel lm_dequant_iq4_nl_generic, lm_dequant_iq4_xs_generic;
lm_vec_dot_kernel lm_vec_dot_iq4_nl_generic, lm_vec_dot_iq4_xs_generic, lm_vec_dot_iq4_nl_avx2,
    lm_vec_dot_iq4_xs_avx2, lm_vec_dot_iq4_nl_avx512, lm_vec_dot_iq4_xs_avx512;
lm_il_gemm_kernel lm_il_gemm_iq4_nl_generic, lm_il_gemm_iq4_nl_avx512, lm_il_gemm_iq4_xs_generic,
    lm_il_gemm_iq4_xs_avx512;
// 16 iq4_xs rows at src (row_bytes apart) -> one il group at dst (il_pack.c's switch calls it)
void lm_il_pack_iq4_xs(void *dst, const void *src, size_t row_bytes, int64_t n_in);

// ---- mxfp4_generic.c, mxfp4_avx2.c, mxfp4_avx512.c: mxfp4 dequant, dots (single and
// multi-token), il pack (il_pack.c's switch calls it) and il GEMM
lm_dequant_kernel lm_dequant_mxfp4_generic;
lm_vec_dot_kernel lm_vec_dot_mxfp4_generic, lm_vec_dot_mxfp4_avx2, lm_vec_dot_mxfp4_avx512;
lm_vec_dot_n_kernel lm_vec_dot_n_mxfp4_avx2, lm_vec_dot_n_mxfp4_avx512;
lm_il_gemm_kernel lm_il_gemm_mxfp4_generic, lm_il_gemm_mxfp4_avx2, lm_il_gemm_mxfp4_avx512;
void lm_il_pack_mxfp4(void *dst, const void *src, size_t row_bytes, int64_t n_in);

// ---- rows_generic.c, attn_generic.c, topk_generic.c and their AVX-512 versions (the AVX2
// table uses the generic ones)
void lm_rmsnorm_generic(float *y, const float *x, const float *w, int64_t n, float eps);
void lm_rope_generic(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot, bool neox);
void lm_geglu_generic(float *g, const float *u, int64_t n, const float *table);
void lm_swiglu_generic(float *g, const float *u, int64_t a, int64_t b, int64_t F);
void lm_swiglu_oai_generic(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit);
void lm_f32_to_f16_generic(lm_f16 *y, const float *x, int64_t n);
void lm_attn_generic(const struct lm_attn_job *j);
void lm_topk_span_generic(struct lm_topk *t, const float *x, int32_t id0, int64_t n);
// rows_enc_generic.c (every table): the encoders' LayerNorm and plain GELU
void lm_layernorm_generic(float *y, const float *x, const float *w, const float *b, int64_t n,
                          float eps);
void lm_gelu_generic(float *g, int64_t n, const float *table);
// rows_enc_avx2.c, rows_enc_avx512.c: the same, bit for bit
void lm_layernorm_avx2(float *y, const float *x, const float *w, const float *b, int64_t n, float eps);
void lm_gelu_avx2(float *g, int64_t n, const float *table);
void lm_layernorm_avx512(float *y, const float *x, const float *w, const float *b, int64_t n,
                         float eps);
void lm_gelu_avx512(float *g, int64_t n, const float *table);
void lm_rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps);
void lm_rope_avx512(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot, bool neox);
void lm_geglu_avx512(float *g, const float *u, int64_t n, const float *table);
void lm_swiglu_avx512(float *g, const float *u, int64_t a, int64_t b, int64_t F);
void lm_swiglu_oai_avx512(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit);
void lm_swiglu_oai_avx2(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit);
void lm_f32_to_f16_avx512(lm_f16 *y, const float *x, int64_t n);
void lm_attn_avx512(const struct lm_attn_job *j); // also the table's attn_q8
void lm_attn_tile_chunk_generic(const struct lm_attn_job *rows, int nr, float *tile);
void lm_attn_tile_chunk_avx512(const struct lm_attn_job *rows, int nr, float *tile);
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
