// AVX2 q4_1 / q5_1 dots (vec_dot and the multi-token vec_dot_n): dot_q1_x86.h's bodies with
// maddubs + madd as the int8 step; bit-identical to dot_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/dot_q1_x86.h"

LM_DEF_DOT_Q1(avx2, dot_u8i8)

#endif
