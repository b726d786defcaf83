// Internal hooks between the kernel translation units (not part of the dispatch API).
#ifndef LM_KERNELS_INTERNAL_H
#define LM_KERNELS_INTERNAL_H

#include "kernels/kernels.h"

// Adds the AVX-512 multi-token dot products (kernels_gemm_avx512.c) to a table.
void lm_kernels_avx512_fill_multi(struct lm_kernels *k);

#endif
