// Model loading: open + validate the GGUF, pick the architecture from
// general.architecture, let it read hyper-parameters and weight views, load the tokenizer.
#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "tokenizer/tokenizer.h"

static const struct lm_arch *const k_archs[] = {
    &lm_arch_gemma3,
    &lm_arch_llama,
    &lm_arch_qwen2,
    &lm_arch_qwen3,
    &lm_arch_qwen3moe,
    &lm_arch_deepseek2,
    &lm_arch_phi3,
    &lm_arch_granite,
    &lm_arch_smollm3,
    &lm_arch_gptoss,
    &lm_arch_bert,
    &lm_arch_nomic_bert,
};
#define N_ARCHS (sizeof k_archs / sizeof k_archs[0])

enum lm_status lm_model_load(struct lm_model **out, const char *path,
                             const struct lm_model_params *params) {
    (void)params;
    *out = NULL;
    const uint64_t t0 = lm_now_ns();
    struct lm_model *m = calloc(1, sizeof *m);
    if (!m) return lm_error_set(LM_ERR_NOMEM, "model: out of memory");
    snprintf(m->path, sizeof m->path, "%s", path);
    enum lm_status st = lm_gguf_open(&m->gguf, path);
    if (st != LM_OK) {
        free(m);
        return st;
    }
    struct lm_gguf_str arch;
    if ((st = lm_gguf_get_str(&m->gguf, "general.architecture", &arch, true)) != LM_OK) goto fail;
    for (size_t i = 0; i < N_ARCHS; i++)
        if (lm_gguf_str_eq(arch, k_archs[i]->name)) m->arch = k_archs[i];
    if (!m->arch) {
        char names[256] = "";
        for (size_t i = 0; i < N_ARCHS; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, k_archs[i]->name, sizeof names - strlen(names) - 1);
        }
        st = lm_error_set(LM_ERR_UNSUPPORTED,
                          "model: %s: unsupported architecture '%.*s' (supported: %s)", path,
                          (int)(arch.len > 64 ? 64 : arch.len), arch.data, names);
        goto fail;
    }
    uint32_t n_layer = 0;
    if ((st = lm_model_key_u32(m, "block_count", &n_layer, true)) != LM_OK) goto fail;
    if (n_layer == 0 || n_layer > 4096) {
        st = lm_error_set(LM_ERR_FORMAT, "model: %s: %s.block_count = %u is out of range [1, 4096]",
                          path, m->arch->name, n_layer);
        goto fail;
    }
    m->layers = calloc(n_layer, sizeof *m->layers);
    if (!m->layers) { st = lm_error_set(LM_ERR_NOMEM, "model: out of memory"); goto fail; }
    if ((st = m->arch->load(m)) != LM_OK) goto fail;
    if ((st = lm_model_load_pooling(m)) != LM_OK) goto fail;
    if ((st = lm_model_repack_il(m)) != LM_OK) goto fail;
    if ((st = lm_tokenizer_load(&m->tok, &m->gguf)) != LM_OK) goto fail;
    struct lm_gguf_str tmpl = {0, NULL};
    if ((st = lm_gguf_get_str(&m->gguf, "tokenizer.chat_template", &tmpl, false)) != LM_OK) goto fail;
    if (tmpl.data) { // a NUL-terminated copy for lm_model_chat_template
        if (!(m->chat_template = malloc(tmpl.len + 1))) {
            st = lm_error_set(LM_ERR_NOMEM, "model: out of memory");
            goto fail;
        }
        memcpy(m->chat_template, tmpl.data, tmpl.len);
        m->chat_template[tmpl.len] = 0;
    }
    if (lm_tokenizer_n_vocab(m->tok) != m->hp.n_vocab) {
        // llama.cpp allows a padded embedding; lumen requires the token count to fit
        if (lm_tokenizer_n_vocab(m->tok) > m->hp.n_vocab) {
            st = lm_error_set(LM_ERR_FORMAT,
                              "model: %s: tokenizer has %d tokens but token_embd.weight has %d rows",
                              path, lm_tokenizer_n_vocab(m->tok), m->hp.n_vocab);
            goto fail;
        }
    }
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) m->weight_bytes += m->gguf.tensors[i].nbytes;
    m->load_ns = lm_now_ns() - t0;
    *out = m;
    return LM_OK;
fail:
    lm_model_free(m);
    return st;
}

void lm_model_free(struct lm_model *m) {
    if (!m) return;
    if (m->tok) lm_tokenizer_free(m->tok);
    free(m->chat_template);
    free(m->rerank_template);
    free(m->layers);
    free(m->exps_buf);
    free(m->mla_buf);
    free(m->il_buf);
    lm_gguf_close(&m->gguf);
    free(m);
}

int32_t lm_model_n_vocab(const struct lm_model *m) { return m->hp.n_vocab; }
int32_t lm_model_n_ctx_train(const struct lm_model *m) { return m->hp.n_ctx_train; }
const char *lm_model_arch(const struct lm_model *m) { return m->arch->name; }
const struct lm_tokenizer *lm_model_tokenizer(const struct lm_model *m) { return m->tok; }
const char *lm_model_chat_template(const struct lm_model *m) { return m->chat_template; }

const float *lm_model_rope_factors(const struct lm_model *m, int32_t n_ctx) {
    if (m->rope_freqs) return m->rope_freqs;
    const int64_t padded = ((int64_t)n_ctx + 255) / 256 * 256;
    const int64_t orig = m->n_ctx_orig > 0 ? m->n_ctx_orig : m->hp.n_ctx_train;
    return padded > orig ? m->rope_long : m->rope_short;
}
