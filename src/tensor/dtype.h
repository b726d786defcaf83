// Tensor element types: GGML's numbering (as stored in GGUF), per-type traits (block size,
// bytes per block), and half / bfloat16 conversion. The quantized blocks' layouts are in
// tensor/blocks.h.
#ifndef LM_TENSOR_DTYPE_H
#define LM_TENSOR_DTYPE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Values are GGML's type ids: they are read straight from GGUF tensor infos.
enum lm_dtype {
    LM_DTYPE_F32 = 0,
    LM_DTYPE_F16 = 1,
    LM_DTYPE_Q4_0 = 2,
    LM_DTYPE_Q4_1 = 3,
    // 4, 5: removed Q4_2 / Q4_3
    LM_DTYPE_Q5_0 = 6,
    LM_DTYPE_Q5_1 = 7,
    LM_DTYPE_Q8_0 = 8,
    LM_DTYPE_Q8_1 = 9,
    LM_DTYPE_Q2_K = 10,
    LM_DTYPE_Q3_K = 11,
    LM_DTYPE_Q4_K = 12,
    LM_DTYPE_Q5_K = 13,
    LM_DTYPE_Q6_K = 14,
    LM_DTYPE_Q8_K = 15,
    LM_DTYPE_IQ2_XXS = 16,
    LM_DTYPE_IQ2_XS = 17,
    LM_DTYPE_IQ3_XXS = 18,
    LM_DTYPE_IQ1_S = 19,
    LM_DTYPE_IQ4_NL = 20,
    LM_DTYPE_IQ3_S = 21,
    LM_DTYPE_IQ2_S = 22,
    LM_DTYPE_IQ4_XS = 23,
    LM_DTYPE_I8 = 24,
    LM_DTYPE_I16 = 25,
    LM_DTYPE_I32 = 26,
    LM_DTYPE_I64 = 27,
    LM_DTYPE_F64 = 28,
    LM_DTYPE_IQ1_M = 29,
    LM_DTYPE_BF16 = 30,
    // 31-33: removed Q4_0_4_4 / _4_8 / _8_8; known below so a refusal can name them
    LM_DTYPE_TQ1_0 = 34,
    LM_DTYPE_TQ2_0 = 35,
    // 36-38: removed IQ4_NL_4_4 / _4_8 / _8_8
    LM_DTYPE_MXFP4 = 39,
    LM_DTYPE_COUNT = 40, // table size; ids >= this are rejected by the GGUF reader
};

typedef uint16_t lm_f16;  // IEEE half, raw bits
typedef uint16_t lm_bf16; // bfloat16, raw bits

struct lm_dtype_traits {
    const char *name;    // "q4_K", as GGML names it; NULL for unknown ids
    int64_t block_size;  // elements per block (1 for plain types)
    size_t type_size;    // bytes per block
    bool supported;      // lumen can dequantize / compute with it
};

// Traits of t, or NULL if t is not a known id (t < 0 or >= LM_DTYPE_COUNT or a hole).
const struct lm_dtype_traits *lm_dtype_traits(int t);
const char *lm_dtype_name(int t); // "?" for unknown
// Bytes of a row of n elements; n must be a multiple of block_size (caller checks).
size_t lm_dtype_row_size(enum lm_dtype t, int64_t n);
// The names of the dtypes whose traits say supported, in id order ("f32, f16, q4_0, ..."),
// into buf (always NUL-terminated, cut at n); returns buf. For refusals that list what runs.
const char *lm_dtype_supported_names(char *buf, size_t n);

// ---- half / bfloat16 conversion (portable scalar; ISA files use F16C / AVX-512) ----
static inline float lm_f16_to_f32(lm_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalise
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) { mant <<= 1; exp--; }
            mant &= 0x3ff;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) { // inf; NaN comes out quiet with its payload, as F16C does
        bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    union { uint32_t u; float f; } v = {bits};
    return v.f;
}

// Round-to-nearest-even, as F16C's _cvtss_sh(x, 0) does.
static inline lm_f16 lm_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {f};
    uint32_t x = v.u, sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (lm_f16)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); // NaN: quiet, top payload
    if (ax == 0x7f800000u) return (lm_f16)(sign | 0x7c00);
    if (ax >= 0x477ff000u) return (lm_f16)(sign | 0x7c00); // overflow -> inf
    if (ax < 0x38800000u) { // subnormal or zero in half
        if (ax < 0x33000000u) return (lm_f16)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; // half subnormal unit is 2^-24
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (lm_f16)(sign | r);
    }
    uint32_t r = ((ax >> 13) - ((127 - 15) << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (lm_f16)(sign | r);
}

static inline float lm_bf16_to_f32(lm_bf16 h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

// Round-to-nearest-even; NaN stays a (quiet) NaN. Same as ggml's GGML_FP32_TO_BF16.
static inline lm_bf16 lm_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (lm_bf16)((v.u >> 16) | 64);
    return (lm_bf16)((v.u + (0x7fffu + ((v.u >> 16) & 1))) >> 16);
}

#endif
