// Pooling (runtime/ops_pool.h): which rows feed a sequence's embedding, their float64 sum in
// position order, the mean, Matryoshka truncation and L2 normalisation; and the pooling
// names of lumen.h.
#include "runtime/ops_pool.h"

#include <math.h>
#include <string.h>

#include "base/status.h"

bool lm_pool_wants(enum lm_pooling p, int32_t pos, int32_t n, bool causal) {
    switch (p) {
    case LM_POOLING_MEAN: return true;
    case LM_POOLING_CLS: return pos == 0;
    case LM_POOLING_LAST: return pos == n - 1;
    case LM_POOLING_RANK: return causal ? pos == n - 1 : pos == 0;
    default: return false;
    }
}

void lm_pool_add(double *acc, const float *row, int64_t E, bool fresh) {
    if (fresh) memset(acc, 0, (size_t)E * sizeof *acc); // a new sum (or a recomputation)
    for (int64_t i = 0; i < E; i++) acc[i] += (double)row[i];
}

void lm_pool_finish(float *out, const double *acc, int64_t E, int32_t n_rows, int32_t dims) {
    const int64_t n = dims > 0 && dims < E ? dims : E;
    const double inv_rows = n_rows > 0 ? 1.0 / n_rows : 1.0;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        out[i] = (float)(acc[i] * inv_rows);
        sum += (double)out[i] * (double)out[i];
    }
    const float scale = sum > 0.0 ? (float)(1.0 / sqrt(sum)) : 0.0f;
    for (int64_t i = 0; i < n; i++) out[i] *= scale;
}

int32_t lm_pool_rank(const struct lm_model *m, const struct lm_kernels *k, double *acc,
                     float *tmp, float *out) {
    const struct lm_weight *W = &m->cls_out;
    const int64_t E = W->n_in;
    if (m->cls.data) { // bert's pre-head: acc[E + j] = tanh(cls row j . acc + b[j]); then the head
        for (int64_t j = 0; j < E; j++) {
            k->dequant[m->cls.type]((const char *)m->cls.data + (size_t)j * m->cls.row_bytes, tmp, E);
            double s = 0.0;
            for (int64_t i = 0; i < E; i++) s += (double)tmp[i] * acc[i];
            if (m->cls_b.data) s += ((const float *)m->cls_b.data)[j];
            acc[E + j] = tanh(s);
        }
        acc += E;
    }
    const int32_t n = (int32_t)W->n_out;
    double mx = -INFINITY;
    double y[64];
    for (int32_t j = 0; j < n && j < 64; j++) {
        k->dequant[W->type]((const char *)W->data + (size_t)j * W->row_bytes, tmp, E);
        double s = 0.0;
        for (int64_t i = 0; i < E; i++) s += (double)tmp[i] * acc[i];
        if (m->cls_out_b.data) s += ((const float *)m->cls_out_b.data)[j];
        y[j] = s;
        mx = s > mx ? s : mx;
    }
    const bool softmax = !strcmp(m->arch->name, "qwen3"); // llama.cpp: the qwen3 reranker's softmax
    double sum = 0.0;
    for (int32_t j = 0; j < n && softmax; j++) sum += exp(y[j] - mx);
    for (int32_t j = 0; j < n; j++) out[j] = (float)(softmax ? exp(y[j] - mx) / sum : y[j]);
    return n;
}

static const char *const k_names[] = {"none", "mean", "cls", "last", "rank"};

const char *lm_pooling_name(enum lm_pooling p) {
    return p >= LM_POOLING_NONE && p <= LM_POOLING_RANK ? k_names[p] : "unspecified";
}

enum lm_status lm_pooling_from_name(const char *s, enum lm_pooling *out) {
    for (int i = 0; i <= LM_POOLING_RANK; i++)
        if (s && strcmp(s, k_names[i]) == 0) {
            *out = (enum lm_pooling)i;
            return LM_OK;
        }
    return lm_error_set(LM_ERR_ARG, "pooling '%s' is none of none, mean, cls, last, rank",
                        s ? s : "(null)");
}
