// AVX-512 VNNI q4_1 / q5_1 dots (vec_dot and the multi-token vec_dot_n): dot_q1_x86.h's
// bodies with vpdpbusd (ymm) as the int8 step; bit-identical to dot_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"
#include "kernels/dot_q1_x86.h"

static inline __m256i dot_u8i8_vnni(__m256i xu, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), xu, y);
}

LM_DEF_DOT_Q1(avx512, dot_u8i8_vnni)

#endif
