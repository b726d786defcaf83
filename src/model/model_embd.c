// What a model says about embeddings: its pooling (<arch>.pooling_type, llama.cpp's values)
// and its embedding width; the pooling itself runs in runtime/ops_pool.c.
#include "base/status.h"
#include "model/model.h"

enum lm_status lm_model_load_pooling(struct lm_model *m) {
    uint32_t u = LM_POOLING_NONE;
    const enum lm_status st = lm_model_key_u32(m, "pooling_type", &u, false);
    if (st != LM_OK) return st;
    if (u > LM_POOLING_RANK)
        return lm_error_set(LM_ERR_FORMAT, "model: %s: %s.pooling_type = %u is not a pooling type "
                            "(0 none, 1 mean, 2 cls, 3 last, 4 rank)", m->path, m->arch->name, u);
    m->hp.pooling = (enum lm_pooling)u;
    return LM_OK;
}

enum lm_pooling lm_model_pooling(const struct lm_model *m) { return m->hp.pooling; }
int32_t lm_model_n_embd(const struct lm_model *m) { return m->hp.n_embd; }
