// LM_TEST_LABELS: unit
// The bert loader (model/bert.c) on tiny random-weight files from tools/make_bert_gguf.py:
// hyper-parameters, every weight view and its shape, the WordPiece vocabulary beside it;
// a missing position_embd and a missing token type count refused with one clear message;
// and lm_model_load still refusing the architecture until the forward pass runs it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

// lm_model_load's steps up to the architecture's loader, with lm_arch_bert chosen directly.
static enum lm_status load_bert(const char *rel, struct lm_model **out) {
    *out = NULL;
    struct lm_model *m = calloc(1, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", lm_test_path(rel));
    enum lm_status st = lm_gguf_open(&m->gguf, m->path);
    if (st != LM_OK) {
        free(m);
        return st;
    }
    m->arch = &lm_arch_bert;
    uint32_t n_layer = 0;
    if ((st = lm_model_key_u32(m, "block_count", &n_layer, true)) == LM_OK && n_layer > 0 && n_layer <= 64) {
        m->layers = calloc(n_layer, sizeof *m->layers);
        st = m->arch->load(m);
        if (st == LM_OK) st = lm_model_load_pooling(m); // as lm_model_load does after the arch
    }
    if (st == LM_OK) st = lm_tokenizer_load(&m->tok, &m->gguf);
    if (st != LM_OK) {
        lm_model_free(m);
        return st;
    }
    *out = m;
    return LM_OK;
}

static bool has(const struct lm_weight *w) { return w->data != NULL; }

static void test_valid(void) {
    struct lm_model *m = NULL;
    CHECKF(load_bert("tests/data/bert_tiny.gguf", &m) == LM_OK, "%s", lm_error_msg());
    if (!m) return;
    const struct lm_hparams *hp = &m->hp;
    CHECK(hp->n_embd == 16 && hp->n_layer == 2 && hp->n_head == 2 && hp->n_head_kv == 2 && hp->n_ff == 32);
    CHECK(hp->head_dim_k == 8 && hp->head_dim_v == 8 && hp->n_ctx_train == 32 && hp->n_vocab == 200);
    CHECK(hp->n_token_types == 2 && hp->pooling == LM_POOLING_MEAN && !hp->causal_attn);
    CHECKF(hp->norm_eps > 0.99e-12f && hp->norm_eps < 1.01e-12f, "eps %g", hp->norm_eps);
    CHECK(has(&m->tok_embd) && has(&m->type_embd) && has(&m->pos_embd) && has(&m->tok_norm) && has(&m->tok_norm_b));
    CHECK(!has(&m->cls) && !has(&m->cls_out) && !has(&m->output)); // an encoder: no LM head
    for (int il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *L = &m->layers[il];
        CHECKF(has(&L->wq) && has(&L->bq) && has(&L->wk) && has(&L->bk) && has(&L->wv) && has(&L->bv) &&
                   has(&L->wo) && has(&L->bo) && has(&L->attn_out_norm) && has(&L->attn_out_norm_b) &&
                   has(&L->up) && has(&L->up_b) && has(&L->down) && has(&L->down_b) && has(&L->layer_out_norm) &&
                   has(&L->layer_out_norm_b),
               "layer %d weights", il);
        CHECK(!has(&L->gate) && !has(&L->attn_norm) && !has(&L->ffn_norm));
    }
    CHECK(m->tok->kind == LM_TOK_KIND_WPM && m->tok->bos == 101 && m->tok->sep == 102);
    // the weights are the file's: position_embd row 0 as written (not all zero)
    const float *pos = m->pos_embd.data;
    float sum = 0;
    for (int i = 0; i < 16; i++) sum += pos[i] * pos[i];
    CHECK(sum > 0);
    lm_model_free(m);
}

static void test_refused(void) {
    struct lm_model *m = NULL;
    enum lm_status st = load_bert("tests/data/bert_tiny_no_pos.gguf", &m);
    CHECKF(st == LM_ERR_FORMAT && !m && strstr(lm_error_msg(), "position_embd.weight"), "%s: %s",
           lm_status_name(st), lm_error_msg());
    st = load_bert("tests/data/bert_tiny_no_types.gguf", &m);
    CHECKF(st == LM_ERR_FORMAT && !m && strstr(lm_error_msg(), "tokenizer.ggml.token_type_count = 0"), "%s: %s",
           lm_status_name(st), lm_error_msg());
    // through the registry: the valid file loads, the malformed ones are refused alike
    st = lm_model_load(&m, lm_test_path("tests/data/bert_tiny.gguf"), &(struct lm_model_params){0});
    CHECKF(st == LM_OK && m && strcmp(lm_model_arch(m), "bert") == 0, "%s: %s", lm_status_name(st),
           lm_error_msg());
    lm_model_free(m);
    m = NULL;
    st = lm_model_load(&m, lm_test_path("tests/data/bert_tiny_no_pos.gguf"), &(struct lm_model_params){0});
    CHECKF(st == LM_ERR_FORMAT && !m && strstr(lm_error_msg(), "position_embd.weight"), "%s: %s",
           lm_status_name(st), lm_error_msg());
}

int main(void) {
    test_valid();
    test_refused();
    return lm_test_finish();
}
