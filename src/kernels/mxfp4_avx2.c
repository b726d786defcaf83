// AVX2 dot products of mxfp4 (vec_dot, vec_dot_n): mxfp4_x86.h's body with maddubs + madd;
// bit-identical to mxfp4_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/mxfp4_x86.h"

LM_DEF_DOT_MXFP4(avx2, dot_i8i8)

#endif
