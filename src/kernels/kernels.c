// Kernel dispatch: the tables (which kernel serves each entry on each ISA, and whether the
// CPU has the ISA), the choice among them (cpuid + LUMEN_FORCE_GENERIC / LUMEN_ISA), which
// activation type each weight dtype's dot product consumes, the row loop, and the u8 repack
// of q8_0 activation rows.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/kernels_internal.h"

// ================================================================ tables
// The AVX2 table starts as a copy of the generic one and the AVX-512 table as a copy of the
// AVX2 one: an entry an ISA has no kernel of keeps the one below.

static const struct lm_kernels k_generic = {
    .name = "generic",
    .dequant = {
        [LM_DTYPE_F32] = lm_dequant_f32_generic, [LM_DTYPE_F16] = lm_dequant_f16_generic,
        [LM_DTYPE_BF16] = lm_dequant_bf16_generic, [LM_DTYPE_Q4_0] = lm_dequant_q4_0_generic,
        [LM_DTYPE_Q4_1] = lm_dequant_q4_1_generic, [LM_DTYPE_Q5_0] = lm_dequant_q5_0_generic,
        [LM_DTYPE_Q5_1] = lm_dequant_q5_1_generic, [LM_DTYPE_Q8_0] = lm_dequant_q8_0_generic,
        [LM_DTYPE_Q2_K] = lm_dequant_q2_K_generic, [LM_DTYPE_Q3_K] = lm_dequant_q3_K_generic,
        [LM_DTYPE_Q4_K] = lm_dequant_q4_K_generic, [LM_DTYPE_Q5_K] = lm_dequant_q5_K_generic,
        [LM_DTYPE_Q6_K] = lm_dequant_q6_K_generic,
        [LM_DTYPE_IQ4_NL] = lm_dequant_iq4_nl_generic, [LM_DTYPE_IQ4_XS] = lm_dequant_iq4_xs_generic,
        [LM_DTYPE_MXFP4] = lm_dequant_mxfp4_generic,
    },
    .quant = {
        [LM_DTYPE_F32] = lm_quant_f32_generic, [LM_DTYPE_F16] = lm_quant_f16_generic,
        [LM_DTYPE_BF16] = lm_quant_bf16_generic, [LM_DTYPE_Q8_0] = lm_quant_q8_0_generic,
        [LM_DTYPE_Q8_1] = lm_quant_q8_1_generic, [LM_DTYPE_Q8_K] = lm_quant_q8_K_generic,
    },
    .vec_dot = {
        [LM_DTYPE_F32] = lm_vec_dot_f32_generic, [LM_DTYPE_F16] = lm_vec_dot_f16_generic,
        [LM_DTYPE_BF16] = lm_vec_dot_bf16_generic, [LM_DTYPE_Q4_0] = lm_vec_dot_q4_0_generic,
        [LM_DTYPE_Q4_1] = lm_vec_dot_q4_1_generic, [LM_DTYPE_Q5_0] = lm_vec_dot_q5_0_generic,
        [LM_DTYPE_Q5_1] = lm_vec_dot_q5_1_generic, [LM_DTYPE_Q8_0] = lm_vec_dot_q8_0_generic,
        [LM_DTYPE_Q2_K] = lm_vec_dot_q2_K_generic, [LM_DTYPE_Q3_K] = lm_vec_dot_q3_K_generic,
        [LM_DTYPE_Q4_K] = lm_vec_dot_q4_K_generic, [LM_DTYPE_Q5_K] = lm_vec_dot_q5_K_generic,
        [LM_DTYPE_Q6_K] = lm_vec_dot_q6_K_generic,
        [LM_DTYPE_IQ4_NL] = lm_vec_dot_iq4_nl_generic, [LM_DTYPE_IQ4_XS] = lm_vec_dot_iq4_xs_generic,
        [LM_DTYPE_MXFP4] = lm_vec_dot_mxfp4_generic,
    },
    .il_gemm = {
        [LM_DTYPE_Q8_0] = lm_il_gemm_q8_0_generic, [LM_DTYPE_Q5_0] = lm_il_gemm_q5_0_generic,
        [LM_DTYPE_Q4_0] = lm_il_gemm_q4_0_generic, [LM_DTYPE_Q5_K] = lm_il_gemm_q5_K_generic,
        [LM_DTYPE_Q4_K] = lm_il_gemm_q4_K_generic, [LM_DTYPE_Q6_K] = lm_il_gemm_q6_K_generic,
        [LM_DTYPE_F16] = lm_il_gemm_f16_generic,
        [LM_DTYPE_Q2_K] = lm_il_gemm_q2_K_generic, [LM_DTYPE_Q3_K] = lm_il_gemm_q3_K_generic,
        [LM_DTYPE_Q4_1] = lm_il_gemm_q4_1_generic, [LM_DTYPE_Q5_1] = lm_il_gemm_q5_1_generic,
        [LM_DTYPE_IQ4_NL] = lm_il_gemm_iq4_nl_generic, [LM_DTYPE_IQ4_XS] = lm_il_gemm_iq4_xs_generic,
        [LM_DTYPE_MXFP4] = lm_il_gemm_mxfp4_generic,
    },
    .rmsnorm = lm_rmsnorm_generic, .rope = lm_rope_generic, .geglu = lm_geglu_generic,
    .swiglu = lm_swiglu_generic, .f32_to_f16 = lm_f32_to_f16_generic, .attn = lm_attn_generic,
    .attn_q8 = lm_attn_generic,
    .topk_span = lm_topk_span_generic,
    .swiglu_oai = lm_swiglu_oai_generic,
    .layernorm = lm_layernorm_generic, .gelu = lm_gelu_generic,
    .attn_tile = lm_attn_tile_chunk_generic,
};

const struct lm_kernels *lm_kernels_generic(void) { return &k_generic; }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static struct lm_kernels k_avx2;
static pthread_once_t k_avx2_once = PTHREAD_ONCE_INIT;

// AVX2 + FMA + F16C: the dots of every dtype (q2_K / q3_K in dot_q23_K_avx2.c), the hot
// dequantizers, the q8_0 / q8_1 / q8_K / f16 activation quantizers, the il GEMMs of every il
// dtype but the IQ4 ones, q4_1 / q5_1 multi-token dots; the row kernels stay generic (but
// gpt-oss's clamped SwiGLU, rows_avx2.c, and the encoders' LayerNorm and GELU, rows_enc_avx2.c)
static void avx2_init(void) {
    k_avx2 = *lm_kernels_generic();
    k_avx2.name = "avx2";
    k_avx2.swiglu_oai = lm_swiglu_oai_avx2;
    k_avx2.layernorm = lm_layernorm_avx2; // rows_enc_avx2.c
    k_avx2.gelu = lm_gelu_avx2;
    k_avx2.dequant[LM_DTYPE_F16] = lm_dequant_f16_avx2;
    k_avx2.dequant[LM_DTYPE_Q8_0] = lm_dequant_q8_0_avx2;
    k_avx2.dequant[LM_DTYPE_Q5_0] = lm_dequant_q5_0_avx2;
    k_avx2.dequant[LM_DTYPE_Q4_K] = lm_dequant_q4_K_avx2;
    k_avx2.dequant[LM_DTYPE_Q6_K] = lm_dequant_q6_K_avx2;
    k_avx2.quant[LM_DTYPE_Q8_0] = lm_quant_q8_0_avx2;
    k_avx2.quant[LM_DTYPE_F16] = lm_quant_f16_avx2;
    k_avx2.quant[LM_DTYPE_Q8_K] = lm_quant_q8_K_avx2;
    k_avx2.vec_dot[LM_DTYPE_F32] = lm_vec_dot_f32_avx2;
    k_avx2.vec_dot[LM_DTYPE_F16] = lm_vec_dot_f16_avx2;
    k_avx2.vec_dot[LM_DTYPE_BF16] = lm_vec_dot_bf16_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q4_0] = lm_vec_dot_q4_0_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q4_1] = lm_vec_dot_q4_1_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q5_0] = lm_vec_dot_q5_0_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q5_1] = lm_vec_dot_q5_1_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q8_0] = lm_vec_dot_q8_0_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q4_K] = lm_vec_dot_q4_K_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q5_K] = lm_vec_dot_q5_K_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q6_K] = lm_vec_dot_q6_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_F16] = lm_il_gemm_f16_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q2_K] = lm_vec_dot_q2_K_avx2;
    k_avx2.vec_dot[LM_DTYPE_Q3_K] = lm_vec_dot_q3_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q4_1] = lm_il_gemm_q4_1_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q5_1] = lm_il_gemm_q5_1_avx2;
    k_avx2.quant[LM_DTYPE_Q8_1] = lm_quant_q8_1_avx2;
    k_avx2.vec_dot_n[LM_DTYPE_Q4_1] = lm_vec_dot_n_q4_1_avx2;
    k_avx2.vec_dot_n[LM_DTYPE_Q5_1] = lm_vec_dot_n_q5_1_avx2;
    // the other il GEMMs (il_avx2.c, il_kq_avx2.c, il_q23_K_avx2.c)
    k_avx2.il_gemm[LM_DTYPE_Q8_0] = lm_il_gemm_q8_0_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q5_0] = lm_il_gemm_q5_0_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q4_0] = lm_il_gemm_q4_0_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q4_K] = lm_il_gemm_q4_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q5_K] = lm_il_gemm_q5_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q6_K] = lm_il_gemm_q6_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q2_K] = lm_il_gemm_q2_K_avx2;
    k_avx2.il_gemm[LM_DTYPE_Q3_K] = lm_il_gemm_q3_K_avx2;
    k_avx2.vec_dot[LM_DTYPE_IQ4_NL] = lm_vec_dot_iq4_nl_avx2;
    k_avx2.vec_dot[LM_DTYPE_IQ4_XS] = lm_vec_dot_iq4_xs_avx2;
    // no AVX2 il kernel for the IQ4 types: their weights keep the file layout there and run
    // vec_dot (the same bits), not the scalar il GEMM, whose table lookups do not vectorize
    k_avx2.il_gemm[LM_DTYPE_IQ4_NL] = NULL;
    k_avx2.il_gemm[LM_DTYPE_IQ4_XS] = NULL;
    // mxfp4 (mxfp4_avx2.c): the dots and the il GEMM (signed lookups: no +128 overflow)
    k_avx2.vec_dot[LM_DTYPE_MXFP4] = lm_vec_dot_mxfp4_avx2;
    k_avx2.vec_dot_n[LM_DTYPE_MXFP4] = lm_vec_dot_n_mxfp4_avx2;
    k_avx2.il_gemm[LM_DTYPE_MXFP4] = lm_il_gemm_mxfp4_avx2;
}

const struct lm_kernels *lm_kernels_avx2(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    // F16C straight from cpuid: GCC 12's __builtin_cpu_supports("f16c") reports 0 on CPUs that have it.
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) return NULL;
    pthread_once(&k_avx2_once, avx2_init);
    return &k_avx2;
}
#else
const struct lm_kernels *lm_kernels_avx2(void) { return NULL; }
#endif

#if defined(__x86_64__)
static struct lm_kernels k_avx512;
static pthread_once_t k_avx512_once = PTHREAD_ONCE_INIT;

// AVX-512 F/BW/VL/DQ + VNNI: the dots of f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0 and the
// k-quants (q2_K / q3_K in dot_q23_K_avx512.c), the multi-token dots, every il kernel, the row
// kernels; dequant and quant stay AVX2
static void avx512_init(void) {
    k_avx512 = *lm_kernels_avx2();
    k_avx512.name = "avx512";
    k_avx512.vec_dot[LM_DTYPE_F32] = lm_vec_dot_f32_avx512;
    k_avx512.vec_dot[LM_DTYPE_F16] = lm_vec_dot_f16_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q4_0] = lm_vec_dot_q4_0_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q5_0] = lm_vec_dot_q5_0_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q8_0] = lm_vec_dot_q8_0_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q4_K] = lm_vec_dot_q4_K_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q5_K] = lm_vec_dot_q5_K_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q6_K] = lm_vec_dot_q6_K_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_F16] = lm_vec_dot_n_f16_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q8_0] = lm_vec_dot_n_q8_0_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q5_0] = lm_vec_dot_n_q5_0_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q4_K] = lm_vec_dot_n_q4_K_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q6_K] = lm_vec_dot_n_q6_K_avx512;
    k_avx512.vec_dot_n_u8[LM_DTYPE_Q5_0] = lm_vec_dot_n_u8_q5_0_avx512;
    k_avx512.vec_dot_n_u8[LM_DTYPE_Q8_0] = lm_vec_dot_n_u8_q8_0_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q8_0] = lm_il_gemm_q8_0_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q5_0] = lm_il_gemm_q5_0_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q4_0] = lm_il_gemm_q4_0_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q4_K] = lm_il_gemm_q4_K_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q5_K] = lm_il_gemm_q5_K_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q6_K] = lm_il_gemm_q6_K_avx512;
    k_avx512.il_gemm[LM_DTYPE_F16] = lm_il_gemm_f16_avx512;
    k_avx512.il_gemv[LM_DTYPE_F16] = lm_il_gemv_f16_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q2_K] = lm_vec_dot_q2_K_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q3_K] = lm_vec_dot_q3_K_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q2_K] = lm_vec_dot_n_q2_K_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q3_K] = lm_vec_dot_n_q3_K_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q2_K] = lm_il_gemm_q2_K_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q3_K] = lm_il_gemm_q3_K_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q4_1] = lm_vec_dot_q4_1_avx512;
    k_avx512.vec_dot[LM_DTYPE_Q5_1] = lm_vec_dot_q5_1_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q4_1] = lm_vec_dot_n_q4_1_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_Q5_1] = lm_vec_dot_n_q5_1_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q4_1] = lm_il_gemm_q4_1_avx512;
    k_avx512.il_gemm[LM_DTYPE_Q5_1] = lm_il_gemm_q5_1_avx512;
    k_avx512.rmsnorm = lm_rmsnorm_avx512;
    k_avx512.rope = lm_rope_avx512;
    k_avx512.geglu = lm_geglu_avx512;
    k_avx512.swiglu = lm_swiglu_avx512;
    k_avx512.swiglu_oai = lm_swiglu_oai_avx512;
    k_avx512.layernorm = lm_layernorm_avx512; // rows_enc_avx512.c
    k_avx512.gelu = lm_gelu_avx512;
    k_avx512.f32_to_f16 = lm_f32_to_f16_avx512;
    k_avx512.attn = lm_attn_avx512;
    k_avx512.attn_q8 = lm_attn_avx512; // one kernel for f16 and q8_0 rows
    k_avx512.attn_tile = lm_attn_tile_chunk_avx512; // attn_tile_avx512.c
    k_avx512.topk_span = lm_topk_span_avx512;
    k_avx512.vec_dot[LM_DTYPE_IQ4_NL] = lm_vec_dot_iq4_nl_avx512;
    k_avx512.vec_dot[LM_DTYPE_IQ4_XS] = lm_vec_dot_iq4_xs_avx512;
    k_avx512.il_gemm[LM_DTYPE_IQ4_NL] = lm_il_gemm_iq4_nl_avx512;
    k_avx512.il_gemm[LM_DTYPE_IQ4_XS] = lm_il_gemm_iq4_xs_avx512;
    k_avx512.vec_dot[LM_DTYPE_MXFP4] = lm_vec_dot_mxfp4_avx512;
    k_avx512.vec_dot_n[LM_DTYPE_MXFP4] = lm_vec_dot_n_mxfp4_avx512;
    k_avx512.il_gemm[LM_DTYPE_MXFP4] = lm_il_gemm_mxfp4_avx512;
    // AMX-INT8 for k-quant prefill where the CPU has it and Linux grants the tile state
    // (il_amx.c is built for x86-64 Linux only)
#if defined(__linux__)
    const char *na = getenv("LUMEN_NO_AMX");
    if (!(na && na[0] && strcmp(na, "0") != 0) && lm_amx_enable()) {
        k_avx512.il_gemm_amx[LM_DTYPE_Q4_K] = lm_il_gemm_amx_q4_K;
        k_avx512.il_gemm_amx[LM_DTYPE_Q5_K] = lm_il_gemm_amx_q5_K;
        k_avx512.il_gemm_amx[LM_DTYPE_Q6_K] = lm_il_gemm_amx_q6_K;
    }
#endif
}

const struct lm_kernels *lm_kernels_avx512(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vnni") || !lm_kernels_avx2())
        return NULL;
    pthread_once(&k_avx512_once, avx512_init);
    return &k_avx512;
}
#else
const struct lm_kernels *lm_kernels_avx512(void) { return NULL; }
#endif

// ================================================================ choice

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

// ================================================================ activation types, row loop, u8 repack

enum lm_dtype lm_vec_dot_type(enum lm_dtype t) {
    switch (t) {
    case LM_DTYPE_F32: return LM_DTYPE_F32;
    case LM_DTYPE_F16: return LM_DTYPE_F16;
    case LM_DTYPE_BF16: return LM_DTYPE_BF16;
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_Q5_0:
    case LM_DTYPE_Q8_0:
    case LM_DTYPE_IQ4_NL:
    case LM_DTYPE_MXFP4: return LM_DTYPE_Q8_0;
    case LM_DTYPE_Q4_1:
    case LM_DTYPE_Q5_1: return LM_DTYPE_Q8_1;
    case LM_DTYPE_Q2_K:
    case LM_DTYPE_Q3_K:
    case LM_DTYPE_Q4_K:
    case LM_DTYPE_Q5_K:
    case LM_DTYPE_Q6_K:
    case LM_DTYPE_IQ4_XS: return LM_DTYPE_Q8_K;
    default: return LM_DTYPE_COUNT; // no dot product for this dtype
    }
}

// W (n_rows, n_in) @ xq (n_in) -> y (r1 - r0), rows [r0, r1)
void lm_matvec_rows(const struct lm_kernels *k, enum lm_dtype t, const void *W, size_t row_bytes,
                    int64_t n_in, const void *xq, float *y, int64_t r0, int64_t r1) {
    lm_vec_dot_fn dot = k->vec_dot[t];
    LM_ASSERT(dot != NULL);
    const char *w = (const char *)W;
    for (int64_t r = r0; r < r1; r++) dot(n_in, &y[r - r0], w + (size_t)r * row_bytes, xq);
}

// q8_0 row (n) -> xu (n bytes, q + 128) and dyv (16 floats per block pair), as kernels.h states
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
