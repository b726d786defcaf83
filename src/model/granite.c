// granite (IBM Granite 3.x dense) and smollm3 (SmolLM3): llama-shaped families that differ
// from llama only by data, read here after the llama loader (llama.c) has read the rest, as
// llama.cpp's src/models/granite.cpp and smollm3.cpp use them.
#include <math.h>
#include <stdio.h>

#include "base/status.h"
#include "model/model.h"

// A multiplier key: absent leaves *out (0: none); present must be finite and > 0.
static enum lm_status scale_key(struct lm_model *m, const char *suffix, float *out,
                                bool required) {
    enum lm_status st = lm_model_key_f32(m, suffix, out, required);
    if (st != LM_OK) return st;
    if (*out != 0.0f && !(isfinite(*out) && *out > 0.0f))
        return lm_error_set(LM_ERR_FORMAT, "%s: %s: %s.%s = %g must be finite and > 0",
                            m->arch->name, m->path, m->arch->name, suffix, *out);
    if (required && *out == 0.0f)
        return lm_error_set(LM_ERR_FORMAT, "%s: %s: %s.%s = 0 (the logits would be divided by it)",
                            m->arch->name, m->path, m->arch->name, suffix);
    return LM_OK;
}

// granite: embedding_scale multiplies the token embeddings, residual_scale each block's
// output before its residual add, attention.scale replaces 1/sqrt(head_dim) (llama.c reads
// it), logit_scale (required, as llama.cpp's loader) divides the logits.
// rope.scaling.finetuned = false turns RoPE off in every layer (llama.cpp's switch).
enum lm_status lm_granite_load_ext(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if (hp->n_expert > 0)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "granite: %s: granite.expert_count = %d: Granite mixture-of-experts "
                            "files are not supported (dense Granite 3.x only)",
                            m->path, hp->n_expert);
    char key[96];
    snprintf(key, sizeof key, "%s.deepstack_mapping", m->arch->name);
    if (lm_gguf_find_kv(&m->gguf, key))
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "granite: %s: key '%s' (Granite Vision's deepstack injection) is not "
                            "supported", m->path, key);
    hp->logit_scale = 0.0f;
    hp->residual_scale = 0.0f;
    float es = 0.0f;
    if ((st = scale_key(m, "logit_scale", &hp->logit_scale, true))) return st;
    if ((st = scale_key(m, "residual_scale", &hp->residual_scale, false))) return st;
    if ((st = scale_key(m, "embedding_scale", &es, false))) return st;
    if (es != 0.0f) hp->embd_scale = es;
    bool rope = true;
    snprintf(key, sizeof key, "%s.rope.scaling.finetuned", m->arch->name);
    if ((st = lm_gguf_get_bool(&m->gguf, key, &rope, false))) return st;
    for (int il = 0; il < hp->n_layer; il++) m->layers[il].no_rope = !rope;
    return LM_OK;
}

// smollm3: every 4th layer (il + 1 a multiple of 4: layers 3, 7, ...) has no RoPE. The
// step is fixed in llama.cpp (hparams.n_no_rope_layer_step = 4; the file has no key for it).
#define SMOLLM3_NO_ROPE_STEP 4
enum lm_status lm_smollm3_load_ext(struct lm_model *m) {
    if (m->hp.n_expert > 0)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "smollm3: %s: smollm3.expert_count = %d: experts are not part of "
                            "this family", m->path, m->hp.n_expert);
    for (int il = 0; il < m->hp.n_layer; il++)
        m->layers[il].no_rope = (il + 1) % SMOLLM3_NO_ROPE_STEP == 0;
    return LM_OK;
}
