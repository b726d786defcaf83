// Pooling of a sequence's final normed hidden states into one embedding (runtime/ops_pool.c):
// rows are added in position order into a float64 sum, whatever the chunks they came in, so
// a sequence's vector is the same bits alone or beside others (batch invariance).
#ifndef LM_RUNTIME_OPS_POOL_H
#define LM_RUNTIME_OPS_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "lumen.h"
#include "model/model.h"

// Does the row at position pos of a sequence of n tokens feed pooling p (MEAN: every row,
// CLS: the first, LAST: the last, RANK: the last, or the first with non-causal attention)?
bool lm_pool_wants(enum lm_pooling p, int32_t pos, int32_t n, bool causal);
// Adds row (E floats) into acc (E doubles); fresh: starts a new sum (position 0, or the one
// row of CLS / LAST).
void lm_pool_add(double *acc, const float *row, int64_t E, bool fresh);
// The vector: acc / n_rows (MEAN; n_rows 1 for CLS / LAST), its first `dims` values (0: all
// E), L2-normalised as llama.cpp's common_embd_normalize(.., 2) does (a float64 norm, each
// value times the float 1/norm; a zero vector stays zero) into out[dims].
void lm_pool_finish(float *out, const double *acc, int64_t E, int32_t n_rows, int32_t dims);
// A reranker's scores from its pooled row acc (E doubles): out[j] = cls_out row j . row
// (+ cls.output.bias), in float64 over the head's dequantized rows (tmp: E floats of
// scratch), then softmax over the outputs for qwen3 (llama.cpp's graph does). Returns the
// number of outputs (lm_model_n_cls_out).
// A BERT cross-encoder's pre-head (cls.weight, bge-reranker) runs first: acc[E, 2E) becomes
// tanh(cls row + cls.bias) (float64 over cls's dequantized rows; acc holds 2E doubles), which
// then feeds cls.output, as llama.cpp's build_pooling.
int32_t lm_pool_rank(const struct lm_model *m, const struct lm_kernels *k, double *acc,
                     float *tmp, float *out);

#endif
