// What include/lumen.h lets a program read about a loaded model (`lumen info`, `lumen
// bench`): the file's header and tensor table, the hyper-parameters, per-layer features,
// the kernel table; and the profiler's record of the kernels its weights run on
// (include/lumen_prof.h).
#include <stdio.h>

#include "base/status.h"
#include "kernels/kernels.h"
#include "lumen.h"
#include "lumen_prof.h"
#include "model/model.h"
#include "prof/prof.h"

_Static_assert(LM_TENSOR_TYPE_COUNT == LM_DTYPE_COUNT, "public tensor type bound = lm_dtype's");

void lm_model_info(const struct lm_model *m, struct lm_model_info *out) {
    const struct lm_gguf *g = &m->gguf;
    struct lm_gguf_str name = {0, ""};
    lm_gguf_get_str(g, "general.name", &name, false); // absent or not a string: ""
    uint32_t file_type = UINT32_MAX;
    lm_gguf_get_u32(g, "general.file_type", &file_type, false);
    const struct lm_kernels *kk = lm_kernels_best();
    // the table's name, and "+amx" where its k-quant prefill GEMMs run on AMX tiles
    bool amx = kk->il_gemm_amx[LM_DTYPE_Q4_K] != NULL;
    *out = (struct lm_model_info){
        .name = name.data, .name_len = (size_t)name.len, .arch = m->arch->name,
        .gguf_version = g->version, .n_tensors = g->n_tensors, .n_metadata = g->n_kv,
        .alignment = g->alignment, .file_bytes = g->size, .file_type = file_type,
        .load_ns = m->load_ns, .kernels = amx ? "avx512+amx" : kk->name,
        .kernels_reason = lm_kernels_reason()};
}

void lm_model_hparams(const struct lm_model *m, struct lm_model_hparams *out) {
    const struct lm_hparams *hp = &m->hp;
    *out = (struct lm_model_hparams){
        .n_vocab = hp->n_vocab, .n_embd = hp->n_embd, .n_layer = hp->n_layer,
        .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim_k = hp->head_dim_k,
        .head_dim_v = hp->head_dim_v, .n_ff = hp->n_ff, .n_ctx_train = hp->n_ctx_train,
        .rms_eps = hp->rms_eps, .rope_neox = hp->rope_type == LM_ROPE_NEOX, .n_rot = hp->n_rot,
        .rope_base = hp->rope_base, .rope_base_swa = hp->rope_base_swa,
        .rope_scale = hp->rope_scale, .n_swa = hp->n_swa, .swa_period = hp->swa_period,
        .attn_scale = hp->attn_scale, .embd_scale = hp->embd_scale,
        .final_softcap = hp->final_softcap, .tied_output = m->tied_output,
        .output_bias = m->output_b.data != NULL, .n_expert = hp->n_expert,
        .n_expert_used = hp->n_expert_used, .n_ff_exp = hp->n_ff_exp,
        .mla_kv_rank = hp->mla_kv_rank, .rope_yarn = hp->rope_scaling == LM_ROPE_SCALING_YARN,
        .rope_longrope = m->rope_long || m->rope_short, .rope_orig_ctx = m->n_ctx_orig,
        .rope_attn_factor = hp->rope_mscale > 0.0f ? hp->rope_mscale : 1.0f,
        .residual_scale = hp->residual_scale, .logit_scale = hp->logit_scale,
        .expert_softmax_k = hp->expert_gating == LM_EXPERT_GATING_SOFTMAX_WEIGHT};
    if (hp->rope_scaling == LM_ROPE_SCALING_LLAMA3 && m->rope_freqs) {
        out->rope_llama3 = true;
        // rope_freqs_buf holds the factors computed from rope.scaling.*; otherwise they
        // point into the file's rope_freqs.weight
        out->rope_factors_from_tensor = m->rope_freqs != m->rope_freqs_buf;
        out->rope_factor_min = out->rope_factor_max = m->rope_freqs[0];
        for (int i = 1; i < hp->n_rot / 2; i++) {
            if (m->rope_freqs[i] < out->rope_factor_min) out->rope_factor_min = m->rope_freqs[i];
            if (m->rope_freqs[i] > out->rope_factor_max) out->rope_factor_max = m->rope_freqs[i];
        }
    }
}

enum lm_status lm_model_layer_info(const struct lm_model *m, int32_t layer,
                                   struct lm_model_layer_info *out) {
    if (layer < 0 || layer >= m->hp.n_layer)
        return lm_error_set(LM_ERR_ARG, "lm_model_layer_info: layer %d of a %d-layer model", layer,
                            m->hp.n_layer);
    const struct lm_layer *l = &m->layers[layer];
    *out = (struct lm_model_layer_info){
        .sliding = l->swa, .qkv_bias = l->bq.data || l->bk.data || l->bv.data,
        .qk_norm = l->q_norm.data != NULL, .post_norms = l->post_attn_norm.data != NULL,
        .attn_sinks = l->attn_sinks.data != NULL, .o_bias = l->bo.data != NULL,
        .no_rope = l->no_rope};
    return LM_OK;
}

const char *lm_tensor_type_name(int32_t type) { return lm_dtype_name(type); }

enum lm_status lm_model_tensor(const struct lm_model *m, uint64_t i, struct lm_tensor_info *out) {
    if (i >= m->gguf.n_tensors)
        return lm_error_set(LM_ERR_ARG, "lm_model_tensor: tensor %llu of %llu", (unsigned long long)i,
                            (unsigned long long)m->gguf.n_tensors);
    const struct lm_gguf_tensor *t = &m->gguf.tensors[i];
    *out = (struct lm_tensor_info){.name = t->name.data, .name_len = (size_t)t->name.len,
                                   .type = (int32_t)t->type, .n_dims = (int32_t)t->n_dims,
                                   .n_elements = 1, .n_bytes = t->nbytes};
    for (int d = 0; d < 4; d++) out->ne[d] = d < LM_GGUF_MAX_DIMS ? t->ne[d] : 1;
    for (uint32_t d = 0; d < t->n_dims; d++) out->n_elements *= (uint64_t)t->ne[d];
    return LM_OK;
}

// ---- profiler: the dot-product kernel each weight dtype runs on

void lm_prof_record_kernels(const struct lm_model *m) {
    if (!lm_prof_on()) return;
    const struct lm_kernels *kk = lm_kernels_best();
    const struct lm_gguf *g = &m->gguf;
    for (uint64_t ti = 0; ti < g->n_tensors; ti++) { // one record per dtype, first seen first
        const enum lm_dtype dt = g->tensors[ti].type;
        bool seen = false;
        for (uint64_t tj = 0; tj < ti; tj++) seen = seen || g->tensors[tj].type == dt;
        if (seen || lm_vec_dot_type(dt) == LM_DTYPE_COUNT) continue;
        char kname[32], var[48];
        snprintf(kname, sizeof kname, "dot_%s", lm_dtype_name(dt));
        snprintf(var, sizeof var, "%s_%s%s", lm_dtype_name(dt), kk->name,
                 kk->vec_dot_n[dt] ? " (+multitoken)" : "");
        lm_prof_variant(kname, var, lm_kernels_reason());
    }
}
