// Pooling of a sequence's final normed hidden states into one embedding (runtime/ops_pool.c):
// rows are added in position order into a float64 sum, whatever the chunks they came in, so
// a sequence's vector is the same bits alone or beside others (batch invariance).
#ifndef LM_RUNTIME_OPS_POOL_H
#define LM_RUNTIME_OPS_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

// Does the row at position pos of a sequence of n tokens feed pooling p (MEAN: every row,
// CLS: the first, LAST: the last)?
bool lm_pool_wants(enum lm_pooling p, int32_t pos, int32_t n);
// Adds row (E floats) into acc (E doubles); fresh: starts a new sum (position 0, or the one
// row of CLS / LAST).
void lm_pool_add(double *acc, const float *row, int64_t E, bool fresh);
// The vector: acc / n_rows (MEAN; n_rows 1 for CLS / LAST), its first `dims` values (0: all
// E), L2-normalised as llama.cpp's common_embd_normalize(.., 2) does (a float64 norm, each
// value times the float 1/norm; a zero vector stays zero) into out[dims].
void lm_pool_finish(float *out, const double *acc, int64_t E, int32_t n_rows, int32_t dims);

#endif
