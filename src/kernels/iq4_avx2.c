// AVX2 dot products (vec_dot) of iq4_nl and iq4_xs: iq4_x86.h's bodies with maddubs + madd;
// bit-identical to iq4_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/iq4_x86.h"

// w (n) iq4_nl . x (n) q8_0
void lm_vec_dot_iq4_nl_avx2(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_iq4_nl_ymm(n, s, w, xq, dot_i8i8);
}

// w (n) iq4_xs . x (n) q8_K
void lm_vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_iq4_xs_ymm(n, s, w, xq, dot_i8i8);
}

#endif
